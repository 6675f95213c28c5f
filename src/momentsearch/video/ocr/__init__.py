"""Text on screen read offline: CRAFT detection and the english_g2 recogniser over EasyOCR's weights."""
