"""The KoboldAI API as KoboldCpp serves it."""
