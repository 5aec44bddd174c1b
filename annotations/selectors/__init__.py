"""Curation's reads, one module a capability: the review queue (``queue``), its counts and the
curators' figures (``stats``), the reassign search (``search``), what curators did
(``history``), the review card (``card``), flags (``flags``), the taxonomy's pages and export
(``taxonomy``), the audit trail (``audit``) and accounts (``accounts``)."""
