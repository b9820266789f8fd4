"""Measure: time, count and profile one benchmark case; nothing here judges."""
