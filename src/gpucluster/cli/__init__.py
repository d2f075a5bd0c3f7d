"""Command-line interface (thin: parsing and rendering; the work is in model/ and engines)."""
