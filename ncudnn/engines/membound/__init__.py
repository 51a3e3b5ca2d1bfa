"""The shared machinery of the memory-bound engines (common): launch steps, arguments, plans, costs."""
