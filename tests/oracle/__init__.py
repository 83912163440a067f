"""Test helpers that build reference models and convert states from MuJoCo (importable by other tests)."""
