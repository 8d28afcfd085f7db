"""What every part of the linter shares, importing nothing else of it."""
