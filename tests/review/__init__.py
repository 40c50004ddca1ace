"""Tests of the review store."""
