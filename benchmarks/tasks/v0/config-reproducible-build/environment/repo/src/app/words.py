import importlib.resources


def common_words(n):
    text = importlib.resources.files("app").joinpath("data/words.txt").read_text()
    return text.split()[:n]
