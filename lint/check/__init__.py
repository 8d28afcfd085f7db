"""One file checked."""
