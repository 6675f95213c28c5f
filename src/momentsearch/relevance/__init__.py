"""Semantic relevance from annotation text: proxies and sparse relevance matrices at corpus scale."""
