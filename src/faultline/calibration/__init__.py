"""Calibration: agreement of faultline's verdicts with human labels."""

from __future__ import annotations
