"""The capacity model (docs/capacity.md): what N concurrent turns need, from costs measured here."""
