"""Specs: the YAML files users write, as validated pydantic models."""
