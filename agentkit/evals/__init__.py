"""Evaluation harness: suites (bfcl, coverage, agent hook), the per-mode runner and its plots."""
