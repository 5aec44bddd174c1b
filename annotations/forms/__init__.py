"""The curation pages' forms: review, flags and inputs."""
