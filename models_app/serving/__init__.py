"""Serving: each taxonomy's live engine, the normalize call that ranks its groups for texts, the
reads it makes, and the probability the answer carries. A normalize request enters here once."""
