"""HF tokenizer.json loading and the native chat formats (Kimi K2, DeepSeek-V3) against `transformers`.

The tokenizer files are built here with the `tokenizers` library: a small byte-level BPE trained on a few strings
plus each model's added tokens, and a tokenizer_config.json carrying the released chat template (Kimi-K2-Instruct-
0905's chat_template.jinja; DeepSeek-V3-0324's template, i.e. DeepSeek-R1's without the <think> prompt). Rendered ids
must equal `apply_chat_template` on the same files.
"""

import json
import os

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

from composer2_jax.data import chat as C
from composer2_jax.data import tokenizer as tk

tokenizers = pytest.importorskip("tokenizers")
transformers = pytest.importorskip("transformers")

CODE = '''def add(a: int, b: int) -> int:
    """Return a + b (naïve, 中文)."""
    return a + b  # 42


class Foo:
    pass
\t\tx = [1, 2, 3]   \n\n'''
TRAIN = [CODE, "hello world, the quick brown fox", 'functions.read:0 {"path": "a.py"} ```json', "## Return of"]

KIMI_TEMPLATE = """{%- if tools -%}
  <|im_system|>tool_declare<|im_middle|>
  # Tools
  {{ tools | tojson }}<|im_end|>
{%- endif -%}
{%- for message in messages -%}
  {%- if loop.first and messages[0]['role'] != 'system' -%}
    <|im_system|>system<|im_middle|>You are Kimi, an AI assistant created by Moonshot AI.<|im_end|>
  {%- endif -%}

  {%- set role_name =  message.get('name') or  message['role'] -%}
  {%- if message['role'] == 'user' -%}
    <|im_user|>{{role_name}}<|im_middle|>
  {%- elif message['role'] == 'assistant' -%}
    <|im_assistant|>{{role_name}}<|im_middle|>
  {%- else -%}
    <|im_system|>{{role_name}}<|im_middle|>
  {%- endif -%}

  {%- if message['role'] == 'assistant' and message.get('tool_calls') -%}
    {%- if message['content'] -%}{{ message['content'] }}{%- endif -%}
    <|tool_calls_section_begin|>
    {%- for tool_call in message['tool_calls'] -%}
      {%- set formatted_id = tool_call['id'] -%}
      <|tool_call_begin|>{{ formatted_id }}<|tool_call_argument_begin|>{% if tool_call['function']['arguments'] is string %}{{ tool_call['function']['arguments'] }}{% else %}{{ tool_call['function']['arguments'] | tojson }}{% endif %}<|tool_call_end|>
    {%- endfor -%}
    <|tool_calls_section_end|>
  {%- elif message['role'] == 'tool' -%}
    ## Return of {{ message.tool_call_id }}
    {{ message['content'] }}
  {%- elif message['content'] is string -%}
    {{ message['content'] }}
  {%- elif message['content'] is not none -%}
    {% for content in message['content'] -%}
      {% if content['type'] == 'image' or 'image' in content or 'image_url' in content -%}
        <|media_start|>image<|media_content|><|media_pad|><|media_end|>
      {% else -%}
        {{ content['text'] }}
      {%- endif -%}
    {%- endfor -%}
  {%- endif -%}
  <|im_end|>
{%- endfor -%}
{%- if add_generation_prompt -%}
  <|im_assistant|>assistant<|im_middle|>
{%- endif -%}"""  # noqa: E501

DEEPSEEK_TEMPLATE = (
    "{% if not add_generation_prompt is defined %}{% set add_generation_prompt = false %}{% endif %}"
    "{% set ns = namespace(is_first=false, is_tool=false, is_output_first=true, system_prompt='', is_first_sp=true) %}"
    "{%- for message in messages %}{%- if message['role'] == 'system' %}{%- if ns.is_first_sp %}"
    "{% set ns.system_prompt = ns.system_prompt + message['content'] %}{% set ns.is_first_sp = false %}"
    "{%- else %}{% set ns.system_prompt = ns.system_prompt + '\\n\\n' + message['content'] %}{%- endif %}"
    "{%- endif %}{%- endfor %}{{ bos_token }}{{ ns.system_prompt }}"
    "{%- for message in messages %}{%- if message['role'] == 'user' %}{%- set ns.is_tool = false -%}"
    "{{'<｜User｜>' + message['content']}}{%- endif %}"
    "{%- if message['role'] == 'assistant' and 'tool_calls' in message %}{%- set ns.is_tool = false -%}"
    "{%- for tool in message['tool_calls'] %}{%- if not ns.is_first %}{%- if message['content'] is none %}"
    "{{'<｜Assistant｜><｜tool▁calls▁begin｜><｜tool▁call▁begin｜>' + tool['type'] + '<｜tool▁sep｜>' + "
    "tool['function']['name'] + '\\n' + '```json' + '\\n' + tool['function']['arguments'] + '\\n' + '```' + "
    "'<｜tool▁call▁end｜>'}}{%- else %}{{'<｜Assistant｜>' + message['content'] + '<｜tool▁calls▁begin｜>"
    "<｜tool▁call▁begin｜>' + tool['type'] + '<｜tool▁sep｜>' + tool['function']['name'] + '\\n' + '```json' + "
    "'\\n' + tool['function']['arguments'] + '\\n' + '```' + '<｜tool▁call▁end｜>'}}{%- endif %}"
    "{%- set ns.is_first = true -%}{%- else %}{{'\\n' + '<｜tool▁call▁begin｜>' + tool['type'] + '<｜tool▁sep｜>' + "
    "tool['function']['name'] + '\\n' + '```json' + '\\n' + tool['function']['arguments'] + '\\n' + '```' + "
    "'<｜tool▁call▁end｜>'}}{%- endif %}{%- endfor %}{{'<｜tool▁calls▁end｜><｜end▁of▁sentence｜>'}}{%- endif %}"
    "{%- if message['role'] == 'assistant' and 'tool_calls' not in message %}{%- if ns.is_tool %}"
    "{{'<｜tool▁outputs▁end｜>' + message['content'] + '<｜end▁of▁sentence｜>'}}{%- set ns.is_tool = false -%}"
    "{%- else %}{% set content = message['content'] %}{% if '</think>' in content %}"
    "{% set content = content.split('</think>')[-1] %}{% endif %}"
    "{{'<｜Assistant｜>' + content + '<｜end▁of▁sentence｜>'}}{%- endif %}{%- endif %}"
    "{%- if message['role'] == 'tool' %}{%- set ns.is_tool = true -%}{%- if ns.is_output_first %}"
    "{{'<｜tool▁outputs▁begin｜><｜tool▁output▁begin｜>' + message['content'] + '<｜tool▁output▁end｜>'}}"
    "{%- set ns.is_output_first = false %}{%- else %}"
    "{{'<｜tool▁output▁begin｜>' + message['content'] + '<｜tool▁output▁end｜>'}}{%- endif %}{%- endif %}"
    "{%- endfor -%}{% if ns.is_tool %}{{'<｜tool▁outputs▁end｜>'}}{% endif %}"
    "{% if add_generation_prompt and not ns.is_tool %}{{'<｜Assistant｜>'}}{% endif %}")

KIMI_SPECIALS = ["[BOS]", "[EOS]", "<|im_end|>", "<|im_user|>", "<|im_assistant|>", "<|im_system|>",
                 "<|im_middle|>", "[PAD]", "<|tool_calls_section_begin|>", "<|tool_calls_section_end|>",
                 "<|tool_call_begin|>", "<|tool_call_argument_begin|>", "<|tool_call_end|>"]
DS_SPECIALS = ["<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>"]
# DeepSeek-V3's tokenizer.json marks its chat and tool tokens as added tokens that are not "special"
DS_ADDED = ["<｜User｜>", "<｜Assistant｜>", "<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>", "<｜tool▁call▁begin｜>",
            "<｜tool▁call▁end｜>", "<｜tool▁outputs▁begin｜>", "<｜tool▁outputs▁end｜>", "<｜tool▁output▁begin｜>",
            "<｜tool▁output▁end｜>", "<｜tool▁sep｜>", "<think>", "    return"]  # the last: a vocabulary extension


def _build(path, specials, added=(), config=None):
    """Train a byte-level BPE on TRAIN, save base.json (no added tokens), then tokenizer.json (+ config)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=400, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train_from_iterator(TRAIN, trainer)
    path.mkdir(parents=True, exist_ok=True)
    tok.save(str(path / "base.json"))
    tok.add_special_tokens(list(specials))
    tok.add_tokens(list(added))
    tok.save(str(path / "tokenizer.json"))
    if config is not None:
        decoder = {str(i): {"content": t.content, "special": t.special, "lstrip": False, "rstrip": False,
                            "normalized": t.normalized, "single_word": False}
                   for i, t in tok.get_added_tokens_decoder().items()}
        cfg = {"tokenizer_class": "PreTrainedTokenizerFast", "clean_up_tokenization_spaces": False,
               "added_tokens_decoder": decoder, **config}
        (path / "tokenizer_config.json").write_text(json.dumps(cfg, ensure_ascii=False, indent=1))
    return path


@pytest.fixture(scope="module")
def kimi_dir(tmp_path_factory):
    return _build(tmp_path_factory.mktemp("kimi_hf"), KIMI_SPECIALS, config={
        "bos_token": "[BOS]", "eos_token": "[EOS]", "pad_token": "[PAD]", "chat_template": KIMI_TEMPLATE})


@pytest.fixture(scope="module")
def ds_dir(tmp_path_factory):
    return _build(tmp_path_factory.mktemp("ds_hf"), DS_SPECIALS, DS_ADDED, config={
        "bos_token": {"content": DS_SPECIALS[0], "__type": "AddedToken"}, "eos_token": DS_SPECIALS[1],
        "pad_token": DS_SPECIALS[1], "chat_template": DEEPSEEK_TEMPLATE})


@pytest.fixture(scope="module")
def plain_dir(tmp_path_factory):
    return _build(tmp_path_factory.mktemp("plain_hf"), ["<|endoftext|>"], config={"eos_token": "<|endoftext|>"})


def _hf(path):
    return transformers.AutoTokenizer.from_pretrained(str(path))


# ---------------------------------------------------------------------------------------------------- HFTokenizer


def test_hf_tokenizer_matches_transformers_ids_and_decode(kimi_dir, ds_dir):
    for path in (kimi_dir, ds_dir):
        ours, ref = tk.make_tokenizer("hf", str(path)), _hf(path)
        assert isinstance(ref, transformers.PreTrainedTokenizerFast)
        ids = ours.encode(CODE)
        assert ids == ref.encode(CODE, add_special_tokens=False)
        assert ours.decode(ids) == ref.decode(ids) == CODE
        with_specials = f"{CODE}{ref.eos_token}tail<｜User｜>x" if path == ds_dir else f"{CODE}<|im_end|>tail"
        ids = ours.encode(with_specials, allow_special=True)
        assert ids == ref.encode(with_specials, add_special_tokens=False)
        assert ours.decode(ids) == ref.decode(ids, skip_special_tokens=False) == with_specials
        assert ours.vocab_size == max(ref.get_vocab().values()) + 1 == len(ref)


def test_hf_plain_encode_never_parses_added_tokens(kimi_dir, ds_dir):
    base = tokenizers.Tokenizer.from_file(str(kimi_dir / "base.json"))
    tok = tk.make_tokenizer("hf", str(kimi_dir))
    text = "x = '<|im_end|><|tool_call_begin|>' [EOS]"
    ids = tok.encode(text)
    assert not any(tok.is_special(i) for i in ids)
    assert ids == base.encode(text).ids  # same ids as the tokenizer without its added tokens
    assert tok.decode(ids) == text
    assert tk.make_tokenizer("hf", str(ds_dir)).encode("<｜User｜>hi") == \
        tokenizers.Tokenizer.from_file(str(ds_dir / "base.json")).encode("<｜User｜>hi").ids
    np_ids = tok.encode_np(text)
    assert np_ids.tolist() == ids


def test_hf_added_tokens_that_are_vocabulary_stay_ordinary(ds_dir):
    """An added token that is neither special nor spelled like a marker is split out as the library does, also in
    text that holds a marker string; `<think>` (not special in the file, but a marker) is a special token."""
    tok, ref = tk.make_tokenizer("hf", str(ds_dir)), _hf(ds_dir)
    ret = ref.convert_tokens_to_ids("    return")
    assert "    return" not in tok.special_tokens and tok.is_special(tok.special_id("<think>"))
    assert ret in tok.encode(CODE) and tok.encode(CODE) == ref.encode(CODE, add_special_tokens=False)
    ids = tok.encode("<｜User｜>\n    return x<think>")
    assert ret in ids and not any(tok.is_special(i) for i in ids)
    assert tok.decode(ids) == "<｜User｜>\n    return x<think>"


def test_hf_specials_from_tokenizer_config(kimi_dir, ds_dir, plain_dir):
    kimi = tk.make_tokenizer("auto", str(kimi_dir))
    assert isinstance(kimi, tk.HFTokenizer) and kimi.chat_template == KIMI_TEMPLATE
    assert (kimi.bos_id, kimi.eos_id, kimi.pad_id) == tuple(kimi.special_id(t) for t in ("[BOS]", "[EOS]", "[PAD]"))
    ds = tk.make_tokenizer("hf", str(ds_dir / "tokenizer.json"))
    assert ds.bos_id == ds.special_id("<｜begin▁of▁sentence｜>") and ds.eos_id == ds.pad_id
    assert ds.special_id("<｜tool▁sep｜>") > ds.special_id("<｜end▁of▁sentence｜>")
    plain = tk.make_tokenizer("hf", str(plain_dir))
    assert plain.bos_id == plain.eos_id == plain.pad_id == plain.special_id("<|endoftext|>")


def test_auto_and_errors(tmp_path, kimi_dir):
    with pytest.raises(ValueError, match=r"neither tokenizer.json .* nor tiktoken.model"):
        tk.make_tokenizer("auto", str(tmp_path))
    assert str(tmp_path) in str(pytest.raises(ValueError, tk.make_tokenizer, "auto", str(tmp_path)).value)
    with pytest.raises(ValueError, match="does not exist"):
        tk.make_tokenizer("hf", str(tmp_path))
    with pytest.raises(ValueError, match="needs path"):
        tk.TokenizerConfig("auto").build()
    assert C.get_chat_format(tk.TokenizerConfig("hf", str(kimi_dir)).build()).name == "kimi_k2"
    with pytest.raises(ValueError, match="expected one of"):
        tk.TokenizerConfig("sentencepiece")
    (tmp_path / "tokenizer.json").write_text("{not json")
    with pytest.raises(ValueError, match="tokenizers.Tokenizer.from_file"):
        tk.make_tokenizer("auto", str(tmp_path))


def test_auto_picks_kimi_tiktoken(tmp_path):
    ranks = {bytes([b]): b for b in range(256)}
    tk.save_tiktoken_ranks(ranks, tmp_path / "tiktoken.model")
    decoder = {str(256 + i): {"content": t} for i, t in enumerate(KIMI_SPECIALS)}
    (tmp_path / "tokenizer_config.json").write_text(json.dumps(
        {"added_tokens_decoder": decoder, "bos_token": "[BOS]", "eos_token": "[EOS]", "pad_token": "[PAD]"}))
    tok = tk.make_tokenizer("auto", str(tmp_path))
    assert isinstance(tok, tk.TiktokenTokenizer) and C.get_chat_format(tok).name == "kimi_k2"


def test_check_vocab_names_both_sizes(kimi_dir):
    tok = tk.make_tokenizer("hf", str(kimi_dir))
    tk.check_vocab(tok, tok.vocab_size)
    with pytest.raises(ValueError, match=rf"vocab_size={tok.vocab_size}.* vocab_size is 300"):
        tk.check_vocab(tok, 300)
    tk.check_vocab(tk.ByteTokenizer(), 512)


def test_real_presets_default_to_their_tokenizer_family():
    from composer2_jax.model_config import PRESETS

    assert set(tk.PRESET_TOKENIZER) == set(PRESETS)
    assert tk.preset_tokenizer("kimi_k2_5", "/ckpt").name == "kimi"
    assert tk.preset_tokenizer("deepseek_v3", "/ckpt") == tk.TokenizerConfig("hf", "/ckpt")
    assert [p for p in PRESETS if tk.PRESET_TOKENIZER[p] == "byte"] == ["toy", "gpu_small"]
    with pytest.raises(ValueError, match="needs path"):  # a real preset never falls back to bytes
        tk.preset_tokenizer("kimi_k2").build()
    with pytest.raises(ValueError, match="no tokenizer family"):
        tk.preset_tokenizer("gpt5")


# ---------------------------------------------------------------------------------------------------- chat formats


def test_format_detection(kimi_dir, ds_dir, plain_dir):
    assert C.get_chat_format(tk.ByteTokenizer()) is C.PROJECT
    ds = tk.make_tokenizer("hf", str(ds_dir))
    assert C.end_token_id(ds) == ds.eos_id and C.end_token_id(tk.ByteTokenizer()) == tk.ByteTokenizer().special_id(
        tk.IM_END)
    assert C.get_chat_format(tk.make_tokenizer("hf", str(kimi_dir))) is C.KIMI_K2
    assert C.get_chat_format(tk.make_tokenizer("hf", str(ds_dir))) is C.DEEPSEEK_V3
    plain = tk.make_tokenizer("hf", str(plain_dir))
    assert C.get_chat_format(plain) is C.PROJECT
    # the project's markers are added after the tokenizer's largest id
    base = plain.special_id("<|endoftext|>") + 1
    assert [plain.special_id(m) for m in tk.CHAT_SPECIAL_TOKENS] == list(range(base, base + 8))
    assert plain.vocab_size == base + 8
    r = C.render_chat([{"role": "user", "content": "hi"}], plain, add_generation_prompt=True)
    assert plain.decode(r.ids) == "<|im_user|>user<|im_middle|>hi<|im_end|><|im_assistant|>assistant<|im_middle|>"


TOOLS = [{"type": "function", "function": {
    "name": "read", "description": "Read a file",
    "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}}}]


def _conversation(call_id):
    """system, user, assistant with two calls, two results, final answer (OpenAI-style calls)."""
    args = [{"path": "a.py"}, {"path": "b.py", "lines": [1, 2], "why": "naïve ✓"}]
    calls = [{"id": call_id("read", k), "type": "function",
              "function": {"name": "read", "arguments": json.dumps(a, ensure_ascii=False)}} for k, a in enumerate(args)]
    return [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Fix a.py — please"},
        {"role": "assistant", "content": "Reading both.", "tool_calls": calls},
        {"role": "tool", "tool_call_id": call_id("read", 0), "name": "read", "content": "x = 1\n"},
        {"role": "tool", "tool_call_id": call_id("read", 1), "name": "read", "content": "y = 2\n"},
        {"role": "assistant", "content": "Done: def add(a, b): return a + b"},
    ]


def _learned(tok, r):
    """Decoded runs of loss-mask 1s."""
    out, run = [], []
    for i, m in zip(r.ids + [None], r.loss_mask + [0]):
        if m:
            run.append(i)
        elif run:
            out.append(tok.decode(run))
            run = []
    return out


def test_kimi_render_equals_transformers(kimi_dir):
    tok, ref = tk.make_tokenizer("hf", str(kimi_dir)), _hf(kimi_dir)
    msgs = _conversation(lambda name, k: f"functions.{name}:{k}")
    r = C.render_chat(msgs, tok, tools=TOOLS)
    want = ref.apply_chat_template(msgs, tools=TOOLS, tokenize=True, return_dict=True)["input_ids"]
    assert r.ids == list(want)
    for k in (1, 2, 3, 5):
        got = C.render_chat(msgs[:k], tok, add_generation_prompt=True).ids
        assert got == list(ref.apply_chat_template(msgs[:k], add_generation_prompt=True, tokenize=True,
                                                   return_dict=True)["input_ids"])
    section = ('<|tool_calls_section_begin|><|tool_call_begin|>functions.read:0<|tool_call_argument_begin|>'
               '{"path": "a.py"}<|tool_call_end|><|tool_call_begin|>functions.read:1<|tool_call_argument_begin|>'
               '{"path": "b.py", "lines": [1, 2], "why": "naïve ✓"}<|tool_call_end|><|tool_calls_section_end|>')
    assert _learned(tok, r) == ["Reading both." + section + "<|im_end|>",
                                "Done: def add(a, b): return a + b<|im_end|>"]
    # tool_call_id defaults to the matching call's id
    no_ids = [{k: v for k, v in m.items() if k != "tool_call_id"} for m in msgs]
    assert C.render_chat(no_ids, tok, tools=TOOLS).ids == r.ids


def test_deepseek_render_equals_transformers(ds_dir):
    tok, ref = tk.make_tokenizer("hf", str(ds_dir)), _hf(ds_dir)
    msgs = _conversation(lambda name, k: f"call_{k}")
    r = C.render_chat(msgs, tok)
    want = ref.apply_chat_template(msgs, tokenize=True, return_dict=True)["input_ids"]
    assert r.ids == list(want)
    for k in (2, 3, 5):
        got = C.render_chat(msgs[:k], tok, add_generation_prompt=True).ids
        assert got == list(ref.apply_chat_template(msgs[:k], add_generation_prompt=True, tokenize=True,
                                                   return_dict=True)["input_ids"])
    no_content = [dict(m, content="") if m.get("tool_calls") else m for m in msgs]
    assert C.render_chat(no_content, tok).ids == list(
        ref.apply_chat_template(no_content, tokenize=True, return_dict=True)["input_ids"])
    # V3's template does not render tools: they follow the system prompt as text
    sys_tools = [msgs[0], {"role": "system", "content": C.DEEPSEEK_TOOLS_PREFIX + json.dumps(TOOLS)}] + msgs[1:]
    assert C.render_chat(msgs, tok, tools=TOOLS).ids == list(
        ref.apply_chat_template(sys_tools, tokenize=True, return_dict=True)["input_ids"])
    calls = ('<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>read\n```json\n{"path": "a.py"}\n```'
             '<｜tool▁call▁end｜>\n<｜tool▁call▁begin｜>function<｜tool▁sep｜>read\n```json\n'
             '{"path": "b.py", "lines": [1, 2], "why": "naïve ✓"}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>')
    assert _learned(tok, r) == ["Reading both." + calls + "<｜end▁of▁sentence｜>",
                                "Done: def add(a, b): return a + b<｜end▁of▁sentence｜>"]


def test_render_in_pieces_equals_whole(kimi_dir, ds_dir):
    """The harness renders a context piece by piece (continuation=True after the first)."""
    for path in (kimi_dir, ds_dir):
        tok = tk.make_tokenizer("hf", str(path))
        msgs = _conversation(lambda name, k: f"functions.{name}:{k}")
        whole = C.render_chat(msgs[:5], tok, tools=TOOLS, add_generation_prompt=True).ids
        pieces = C.render_chat(msgs[:1], tok, tools=TOOLS).ids
        pieces += C.render_chat(msgs[1:2], tok, continuation=True).ids
        pieces += C.render_chat(msgs[2:3], tok, continuation=True).ids
        pieces += C.render_chat(msgs[3:5], tok, continuation=True, add_generation_prompt=True).ids
        assert pieces == whole
        if path == ds_dir:
            with pytest.raises(ValueError, match="cannot continue"):
                C.render_chat(msgs[:1], tok, continuation=True)


@pytest.mark.parametrize("name", ["project", "kimi_k2", "deepseek_v3"])
def test_format_and_parse_round_trip(name):
    fmt = C.get_chat_format(name)
    calls = [("read_file", {"path": "a.py"}), ("run_terminal_cmd", {"command": "echo 'hi' ✓"}),
             ("submit", {})]
    text = "Thinking first." + fmt.format_calls(calls) + fmt.end
    p = C.parse_assistant(text, fmt)
    assert p.ok and p.content == "Thinking first."
    assert [(c.name, c.arguments) for c in p.tool_calls] == calls
    one = C.parse_assistant("x" + C.format_tool_call("read", {"path": "b"}, name, index=4), name)
    assert one.tool_calls == [C.ToolCall("read", {"path": "b"})]
    if name == "kimi_k2":
        assert one.tool_calls[0].id == "functions.read:4"
    assert C.parse_assistant("just text" + fmt.end + "ignored", fmt) == C.ParsedAssistant("just text", [], [])


def test_format_tool_call_defaults_to_project_markup():
    assert C.format_tool_call("f", {"a": 1}) == '<|tool_call|>{"name": "f", "arguments": {"a": 1}}<|/tool_call|>'
    assert C.format_tool_call("f", {}, tk.ByteTokenizer()) == C.format_tool_call("f", {})
    with pytest.raises(ValueError, match="unknown chat format"):
        C.get_chat_format("chatml")


K_SB, K_SE, K_CB, K_AB, K_CE = C.KIMI_TOOL_TOKENS[0], C.KIMI_TOOL_TOKENS[4], *C.KIMI_TOOL_TOKENS[1:4]
D_SB, D_CB, D_SEP, D_CE, D_SE = C.DEEPSEEK_TOOL_TOKENS


def _kc(body):
    return f"{K_CB}{body}{K_CE}"


def _dc(body):
    return f"{D_CB}{body}{D_CE}"


GOOD_K = _kc(f'functions.read:0{K_AB}{{"path": "a"}}')
GOOD_D = _dc('function' + D_SEP + 'read\n```json\n{"path": "a"}\n```')


@pytest.mark.parametrize("fmt,text,kinds,n_good", [
    ("kimi_k2", f"{K_SB}{GOOD_K}{K_CB}functions.read:1{K_AB}{{\"path\": ", ["unterminated"], 1),  # missing end
    ("kimi_k2", f"{K_SB}{GOOD_K}", ["unterminated"], 1),  # section never closed
    ("kimi_k2", f"{K_SB}{_kc('functions.read:0' + K_AB + '{bad json}')}{K_SE}", ["invalid_json"], 0),
    ("kimi_k2", f"{K_SB}{_kc('functions.read:0' + K_AB + '[1, 2]')}{K_SE}", ["bad_arguments"], 0),
    ("kimi_k2", f"{K_SB}{_kc('functions.read:0 {}')}{K_SE}", ["not_object"], 0),  # no argument marker
    ("kimi_k2", f"{K_SB}{_kc('functions.:0' + K_AB + '{}')}{K_SE}", ["bad_name"], 0),
    ("kimi_k2", f"{K_SB}garbage{GOOD_K}{K_SE}", ["not_object"], 1),  # text in a section outside a call
    ("kimi_k2", f"text{K_CE}more{K_SB}{GOOD_K}{K_SE}", ["stray_end"], 1),
    ("kimi_k2", f"{K_SB}{K_SE}", ["not_object"], 0),  # empty section
    ("deepseek_v3", f"{D_SB}{GOOD_D}\n{D_CB}function{D_SEP}read\n```json\n{{", ["unterminated"], 1),
    ("deepseek_v3", D_SB + _dc(f"function{D_SEP}read\n```json\n{{x}}\n```") + D_SE, ["invalid_json"], 0),
    ("deepseek_v3", f"{D_SB}{_dc('read' + chr(10) + '{}')}{D_SE}", ["not_object"], 0),  # no tool_sep
    ("deepseek_v3", f"{D_SB}{_dc('function' + D_SEP + chr(10) + '{}')}{D_SE}", ["bad_name"], 0),
    ("deepseek_v3", f"{D_SB}{_dc('function' + D_SEP + 'read' + chr(10) + '```json' + chr(10) + '{}')}{D_SE}",
     ["invalid_json"], 0),  # fence never closed
    ("deepseek_v3", f"a{D_SE}{D_SB}{GOOD_D}{D_SE}", ["stray_end"], 1),
])
def test_parse_malformed_native_calls(fmt, text, kinds, n_good):
    p = C.parse_assistant(text, fmt)
    assert [e.kind for e in p.errors] == kinds
    assert len(p.tool_calls) == n_good
    indices = sorted([e.index for e in p.errors] + list(range(len(kinds) + n_good)))
    assert len(set(e.index for e in p.errors)) == len(kinds) and max(indices) < len(kinds) + n_good


@pytest.mark.parametrize("name", ["kimi_k2", "deepseek_v3"])
def test_parse_native_random_markup(name):
    """Random strings of the format's markers and text: no exception, one error or call per block index."""
    import random

    fmt, rng = C.get_chat_format(name), random.Random(0)
    parts = list(fmt.tokens) + ["x", "{}", '{"a": 1}', "functions.f:0", "function", "read\n```json\n{}\n```", "\n"]
    for _ in range(2000):
        p = fmt.parse("".join(rng.choice(parts) for _ in range(rng.randint(0, 12))))
        indices = sorted(e.index for e in p.errors)
        assert len(set(indices)) == len(indices) and all(i < len(p.errors) + len(p.tool_calls) for i in indices)


def test_parse_native_never_raises():
    for fmt in ("kimi_k2", "deepseek_v3"):
        assert C.parse_assistant(None, fmt).errors[0].kind == "not_text"  # type: ignore[arg-type]
        for text in (K_SB * 3, D_SB + D_CB * 2 + D_SE, K_CE + K_SE + K_AB, "", D_SE * 2):
            C.parse_assistant(text, fmt)


# ---------------------------------------------------------------------------------------------------- harness


class _Env:
    """The Environment surface the harness uses: files in a dict; records every call."""

    def __init__(self):
        self.files, self.calls = {"a.py": "x = 1\n"}, []

    @staticmethod
    def tools():
        from composer2_jax.env.tool_schemas import tool_specs

        return tool_specs()

    def call(self, sid, tool, args):
        from composer2_jax.env.observation import Observation

        self.calls.append((tool, args))
        if tool == "read_file":
            return Observation(True, self.files.get(args.get("path"), "missing"))
        return Observation(True, f"ran {tool}")


@pytest.mark.parametrize("which", ["kimi", "deepseek"])
def test_harness_speaks_the_native_format(which, kimi_dir, ds_dir):
    from composer2_jax.env.harness import HarnessConfig, is_summary_request, run_episode

    tok = tk.make_tokenizer("hf", str(kimi_dir if which == "kimi" else ds_dir))
    fmt = C.get_chat_format(tok)
    cut = C.KIMI_CALL_END if which == "kimi" else C.DS_CALL_END
    replies = ["Reading." + fmt.format_calls([("read_file", {"path": "a.py"})]) + fmt.end,
               fmt.format_calls([("read_file", {"path": "b.py"})]).split(cut)[0],  # cut mid-call: malformed
               fmt.format_calls([("submit", {"summary": "done"})], start_index=2) + fmt.end]
    prompts = []

    class Policy:
        def generate(self, prompt_ids, max_new_tokens):
            prompts.append(list(prompt_ids))
            return tok.encode(replies[len(prompts) - 1], allow_special=True)

    env = _Env()
    r = run_episode(env, "sid", "Fix a.py", Policy(), tok, HarnessConfig(max_turns=5))
    assert r.stop_reason == "submitted" and [c[0] for c in env.calls] == ["read_file", "submit"]
    assert r.malformed == 1 and r.tool_call_errors == [None, "bad_json", None]
    assert r.messages[2]["tool_calls"] == [{"name": "read_file", "arguments": {"path": "a.py"}}]
    second = tok.decode(prompts[1])
    first_turn = tok.decode(prompts[0])
    if which == "kimi":
        assert first_turn.startswith("<|im_system|>tool_declare<|im_middle|>")
        assert first_turn.endswith("<|im_user|>user<|im_middle|>Fix a.py<|im_end|>"
                                   "<|im_assistant|>assistant<|im_middle|>")
        assert second.endswith("<|im_system|>read_file<|im_middle|>## Return of functions.read_file:0\n    x = 1\n"
                               "<|im_end|><|im_assistant|>assistant<|im_middle|>")
    else:
        assert first_turn.startswith("<｜begin▁of▁sentence｜>") and first_turn.count("<｜begin▁of▁sentence｜>") == 1
        assert first_turn.endswith("<｜User｜>Fix a.py<｜Assistant｜>")
        assert second.endswith("<｜tool▁outputs▁begin｜><｜tool▁output▁begin｜>x = 1\n<｜tool▁output▁end｜>"
                               "<｜tool▁outputs▁end｜>")
    # the reply's thinking and calls are the trained turns, split at the format's call-begin token
    trained = [(t.role, tok.decode(t.tokens)) for t in r.episode.turns if t.trainable]
    assert trained[0] == ("thinking", "Reading.")
    assert trained[1][0] == "tool_call" and trained[1][1].startswith(fmt.call_begin)
    summary = C.render_chat([{"role": "user", "content": HarnessConfig().summary_prompt}], tok,
                            add_generation_prompt=True, continuation=True).ids
    assert is_summary_request(tok.decode(prompts[0][:3] + summary), HarnessConfig(), tok)


@pytest.mark.parametrize("which", ["kimi", "deepseek"])
def test_scripted_agents_write_the_native_format(which, kimi_dir, ds_dir):
    """Scripted replies are written in the project's markup; their calls reach the tokenizer's native format."""
    from composer2_jax.bench.policies import ScriptedPolicy, call
    from composer2_jax.env.harness import HarnessConfig, run_episode

    tok = tk.make_tokenizer("hf", str(kimi_dir if which == "kimi" else ds_dir))
    cfg = HarnessConfig(max_turns=5)
    replies = ["Reading." + call("read_file", path="a.py") + "\n" + call("read_file", path="b.py")]
    env = _Env()
    r = run_episode(env, "sid", "Fix a.py", ScriptedPolicy(tok, replies, cfg), tok, cfg)
    assert r.stop_reason == "submitted" and [c[0] for c in env.calls] == ["read_file", "read_file", "submit"]
    reply = [t for t in r.episode.turns if t.trainable][1]
    text = tok.decode(reply.tokens)
    assert text.startswith(C.get_chat_format(tok).call_begin) and text.count(C.get_chat_format(tok).call_begin) == 1
    assert text.endswith(C.get_chat_format(tok).end)
    assert C.rewrite_tool_calls(replies[0], "project") == replies[0]
