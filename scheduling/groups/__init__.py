"""Task groups (design §10): creation, network domains, scheduling windows and gang placement."""
