"""The `upsertsink lint` command."""
