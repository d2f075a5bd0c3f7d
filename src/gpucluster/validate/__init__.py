"""Run validation cases (published measurements) against the model."""
