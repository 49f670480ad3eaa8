"""Data: document sources, tokenizers, the grain packing pipeline, the chat template, and a seqio bridge.

Trainer entry points:
    tok = make_tokenizer("byte")               # or make_tokenizer("auto", path=dir): tokenizer.json, tiktoken.model
    cfg = data_config(seq_len=..., batch_size=...)
    it = iter(make_dataset(cfg, tok, jax.process_index(), jax.process_count()))
    batch = next(it)   # tokens, targets, loss_mask, segment_ids, positions: [B_local, T] int32
    state = it.get_state(); it.set_state(state)                  # or orbax_save_args(it) / orbax_restore_args(it)
SFT: `SourceConfig(kind="chat_jsonl", path=...)` documents are rendered by `render_chat` (loss on assistant tokens);
serving parses model output with `parse_assistant`. `seqio_bridge` (imports tensorflow) is loaded only on use.
"""

from composer2_jax.data.chat import (
    ChatFormat,
    ParsedAssistant,
    RenderedChat,
    ToolCall,
    ToolCallError,
    detect_chat_format,
    end_token_id,
    format_tool_call,
    parse_assistant,
    render_chat,
)
from composer2_jax.data.pipeline import (
    BATCH_KEYS,
    DataConfig,
    PackIterDataset,
    data_config,
    describe_batch,
    document_to_example,
    load_state,
    make_dataset,
    make_documents,
    make_examples,
    make_iterator,
    orbax_restore_args,
    orbax_save_args,
    save_state,
    warm_token_cache,
)
from composer2_jax.data.sources import (
    ArrayRecordSource,
    DirectorySource,
    HFDatasetSource,
    InMemorySource,
    JsonlSource,
    ParquetSource,
    SourceConfig,
    make_source,
    stdlib_source,
)
from composer2_jax.data.tokenizer import (
    ByteTokenizer,
    HFTokenizer,
    TiktokenTokenizer,
    Tokenizer,
    check_vocab,
    make_tokenizer,
    preset_tokenizer,
)

__all__ = [
    "ArrayRecordSource", "BATCH_KEYS", "ByteTokenizer", "ChatFormat", "DataConfig", "DirectorySource",
    "HFDatasetSource", "HFTokenizer", "InMemorySource", "JsonlSource", "PackIterDataset", "ParquetSource",
    "ParsedAssistant", "RenderedChat", "SourceConfig", "TiktokenTokenizer", "Tokenizer", "ToolCall", "ToolCallError",
    "check_vocab", "data_config", "describe_batch", "detect_chat_format", "end_token_id", "preset_tokenizer",
    "document_to_example", "format_tool_call", "load_state", "make_dataset", "make_documents", "make_examples",
    "make_iterator", "make_source", "make_tokenizer", "orbax_restore_args", "orbax_save_args", "parse_assistant",
    "render_chat", "save_state", "stdlib_source", "warm_token_cache",
]
