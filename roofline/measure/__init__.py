"""Measurements on the local device. Only the modules that measure import torch; the schema does not."""
