"""Apptainer definition files (pinned tool versions) and image build/check helpers."""
