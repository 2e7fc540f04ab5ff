"""``python -m kvviz.train_gpt``: the tiny GPT's training script (kvviz.models.gpt.train)."""
from kvviz.models.gpt.train import main

if __name__ == "__main__":
    main()
