"""Conformance: run the spec's neutral-format cases against gpupool's policies."""
