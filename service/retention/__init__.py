"""Retention: the archive of old log segments, and the archiver that writes them, lets final
turns go and trims the streams (DESIGN section 10)."""
