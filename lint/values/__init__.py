"""What a name or an expression evaluates to, SQL text included."""
