"""Videos in: decoding (PyAV), visual encoders, subtitles beside videos, and ``ingest`` -> a corpus folder."""
