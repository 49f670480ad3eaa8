from app.words import common_words

print(" ".join(common_words(3)))
