from notes.search import Searcher
from notes.store import NoteStore

__all__ = ["NoteStore", "Searcher"]
