"""Trainable encoders: the paper's character BiLSTM, a hashed n-gram bag, a hashed-word CNN and
S2Net's linear projection of TF-IDF vectors.

Each is an ``nn.Module`` configured by a frozen dataclass. ``featurize`` turns texts into input
tensors (with the training-time randomness of the paper where it has any), ``forward`` returns
raw embeddings ``(B, D)``, and ``encode`` gives the L2-normalised numpy vectors that the index
and every matcher use.

One module an encoder (``char_bilstm``, ``ngram_bag``, ``conv_words``, ``s2net``) beside what
they share (``base``). Callers import from the module that defines what they need.
"""
