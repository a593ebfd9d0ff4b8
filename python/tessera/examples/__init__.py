"""Programs built on tessera's ops: minilm (all-MiniLM-L6-v2 sentence embeddings)."""
