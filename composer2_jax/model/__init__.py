"""The Kimi-K2.5 / DeepSeek-V3 family decoder in functional Flax (linen).

Axis legend, used in names (`x_BTD`), shape comments and every einsum, in every package:
  B batch · T query length · S key length · D model width · H heads · K query/key head dim
  R rotary head dim · L kv latent rank · Q q latent rank · V value head dim (`V` alone in shapes: vocab, see names)
  E experts · C capacity · F ffn width · M MTP depth · N tokens (B·T flattened) · k top-k · U scanned units
  P prompt length · W draft window (the last 2·drafts positions) · Z stop sequences · G groups
  A pages (a paged cache's pool, or a row's page table) · Y slots per page
  O / I output / input features of a stored (HF, quantised) weight · X a width made of several of the above
  (N+V, 2D, ...) or flattened leading axes
"""

from composer2_jax.model.transformer import ModelOutput, Transformer

__all__ = ["Transformer", "ModelOutput"]
