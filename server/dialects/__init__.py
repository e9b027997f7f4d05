"""HTTP dialects: each turns its wire format into a GenerationRequest and events back."""
