"""The curation pages: the review card, batch review, the queue, inputs, taxonomies, flags, the
audit trail and a user's account, one module a page family."""
