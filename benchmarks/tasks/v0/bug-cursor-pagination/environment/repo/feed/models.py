import dataclasses


@dataclasses.dataclass(frozen=True)
class Post:
    id: int
    created_at: int  # unix seconds
    text: str
