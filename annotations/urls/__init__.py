"""The curation pages' URLs, each mounted by siamweb/urls.py."""
