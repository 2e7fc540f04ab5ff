"""Models that run behind one protocol: ``forward(token_ids, cache, start_pos) -> PassRecord``."""
