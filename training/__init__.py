"""Building and training the project's own small DiffusionGemma models (tokenizer, data, training)."""
