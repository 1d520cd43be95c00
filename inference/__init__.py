"""Model engines behind one interface (`inference.types.Engine`)."""
