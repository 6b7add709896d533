"""Baseline storage: one JSON file per GPU model, read strictly, merged and written atomically."""
