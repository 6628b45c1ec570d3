"""The unknowns inbox: reports no rule decided, grouped by the shape of their error, with a drafted rule each."""
