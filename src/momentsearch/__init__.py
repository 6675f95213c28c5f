"""momentsearch: video corpus moment retrieval with many-to-many graded relevance."""

__version__ = "0.1.0"
