"""Open word pools: the things visitors name, far more of them than any one family lists.

A small model learns to *copy* a key name, a topic or a subject from the prompt only when it
cannot get by with memorising a short list of them; these pools (and `made_up_word`, which
makes words no list has) give the paraphrase and English families that variety.  Written for
this project.

    rng.choice(NOUNS)                       # "lantern"
    made_up_word(rng)                       # "velto"
"""

from __future__ import annotations

import random

# Everyday nouns, singular.
NOUNS = (
    "account", "actor", "address", "airport", "album", "alarm", "animal", "answer", "apartment", "apple", "area",
    "army", "arrow", "article", "artist", "author", "award", "baby", "backpack", "badge", "bag", "bakery", "ball",
    "balloon", "band", "bank", "basket", "battery", "beach", "bear", "bed", "bell", "bench", "bike", "bill", "bird",
    "blanket", "board", "boat", "body", "book", "boot", "bottle", "box", "brain", "branch", "brand", "bread",
    "bridge", "brush", "bucket", "budget", "building", "bus", "button", "cabin", "cable", "cafe", "cake", "camera",
    "camp", "candle", "canvas", "captain", "car", "card", "carpet", "cart", "castle", "cat", "chair", "channel",
    "chapter", "chart", "chef", "chicken", "child", "city", "class", "client", "clock", "cloud", "club", "coach",
    "coat", "code", "coin", "color", "comment", "company", "computer", "concert", "contract", "cook", "corner",
    "country", "course", "court", "cow", "cup", "customer", "cycle", "dance", "date", "day", "deal", "desk",
    "device", "diary", "dinner", "doctor", "dog", "door", "dragon", "drawer", "dream", "dress", "driver", "drum",
    "duck", "engine", "event", "exam", "farm", "feather", "festival", "field", "file", "film", "flag", "flight",
    "floor", "flower", "folder", "forest", "fork", "fountain", "friend", "fruit", "game", "garage", "garden", "gate",
    "gift", "glass", "goal", "group", "guide", "guitar", "hall", "hammer", "harbor", "hat", "helmet", "hero", "hill",
    "holiday", "horse", "hospital", "hotel", "hour", "house", "idea", "image", "island", "item", "jacket", "jar",
    "job", "journey", "kettle", "key", "kitchen", "kite", "ladder", "lake", "lamp", "language", "laptop", "lesson",
    "letter", "level", "library", "light", "line", "link", "list", "lock", "machine", "magazine", "map", "market",
    "meal", "medal", "meeting", "member", "menu", "message", "meter", "mirror", "mission", "model", "monster",
    "month", "moon", "motor", "mountain", "mouse", "movie", "museum", "music", "nest", "network", "note", "novel",
    "number", "ocean", "office", "orange", "order", "owner", "package", "page", "painting", "panel", "paper",
    "park", "party", "passenger", "password", "path", "patient", "pattern", "pencil", "person", "phone", "photo",
    "piano", "picture", "pilot", "pizza", "plan", "planet", "plant", "plate", "player", "plot", "pocket", "poem",
    "pond", "post", "poster", "pot", "printer", "prize", "product", "profile", "project", "puzzle", "queen",
    "question", "race", "radio", "recipe", "record", "region", "report", "restaurant", "review", "ribbon", "ring",
    "river", "road", "robot", "rocket", "roof", "room", "rope", "route", "ruler", "salad", "sandwich", "school",
    "score", "screen", "sea", "season", "seat", "sensor", "server", "shelf", "ship", "shirt", "shoe", "shop",
    "signal", "singer", "size", "skill", "sky", "song", "sound", "space", "speaker", "sport", "stage", "star",
    "station", "statue", "step", "stone", "store", "storm", "story", "street", "student", "studio", "style",
    "subject", "sun", "supply", "table", "tag", "task", "taxi", "teacher", "team", "tent", "ticket", "tiger",
    "timer", "title", "tool", "tower", "town", "toy", "track", "tractor", "trail", "train", "tree", "trip",
    "truck", "tunnel", "uniform", "user", "valley", "vase", "vehicle", "video", "village", "visitor", "voice",
    "wagon", "wall", "wallet", "watch", "water", "wave", "weather", "website", "wheel", "window", "winner",
    "wizard", "word", "worker", "world", "writer", "yard", "year", "zone",
)

# Things you can count on a table or in a box (word problems).
COUNTABLE = (
    "apple", "backpack", "badge", "bag", "ball", "balloon", "basket", "battery", "bell", "bike", "book", "boot",
    "bottle", "box", "brush", "bucket", "button", "cake", "camera", "candle", "card", "chair", "coin", "cookie",
    "cup", "doll", "drum", "egg", "feather", "flag", "flower", "fork", "gift", "glass", "hat", "helmet", "jar",
    "jacket", "key", "kite", "lamp", "leaf", "lemon", "letter", "marble", "medal", "mug", "nail", "notebook",
    "orange", "pair of socks", "peach", "pear", "pen", "pencil", "photo", "pie", "plant", "plate", "poster",
    "potato", "ribbon", "ring", "robot", "rock", "ruler", "sandwich", "seed", "shell", "shirt", "shoe", "spoon",
    "stamp", "sticker", "stone", "tomato", "towel", "toy", "toy car", "tree", "truck", "tulip", "vase", "wagon",
    "wheel",
)

ADJECTIVES = (
    "active", "ancient", "angry", "average", "basic", "best", "big", "blue", "bold", "brave", "bright", "broken",
    "busy", "calm", "cheap", "clean", "clever", "cold", "cool", "current", "daily", "dark", "deep", "default",
    "early", "easy", "empty", "extra", "fast", "final", "first", "free", "fresh", "friendly", "full", "funny",
    "gentle", "giant", "golden", "good", "green", "happy", "heavy", "hidden", "high", "home", "hot", "huge", "last",
    "late", "light", "little", "local", "long", "loud", "lucky", "main", "major", "max", "min", "modern", "new",
    "next", "nice", "old", "open", "past", "primary", "private", "public", "quick", "quiet", "rare", "raw", "real",
    "red", "rich", "round", "safe", "secret", "short", "silent", "simple", "slow", "small", "smart", "soft",
    "special", "strong", "sunny", "super", "sweet", "tall", "tiny", "top", "total", "true", "warm", "wild", "young",
)

# How people end a key name that carries a unit or a role.
UNIT_SUFFIXES = ("kg", "g", "m", "cm", "km", "mm", "lb", "ft", "in", "s", "ms", "min", "h", "pct", "usd", "eur")

_ONSETS = ("b", "br", "d", "f", "g", "gl", "k", "l", "m", "n", "p", "pl", "r", "s", "st", "t", "tr", "v", "z", "ch",
           "sh", "th", "w", "y", "j")
_VOWELS = ("a", "e", "i", "o", "u", "ai", "ee", "oo", "ou", "ia")
_CODAS = ("", "", "", "n", "r", "l", "s", "t", "k", "m", "x", "nd", "st")


def plural(noun: str) -> str:
    """English plural of a simple noun: "box" -> "boxes", "city" -> "cities", "pair of socks" -> "pairs of socks"."""
    head, _, tail = noun.partition(" of ")
    if tail:
        return f"{plural(head)} of {tail}"
    irregular = {"child": "children", "person": "people", "mouse": "mice", "shelf": "shelves", "knife": "knives",
                 "leaf": "leaves", "man": "men", "woman": "women", "foot": "feet", "tooth": "teeth",
                 "potato": "potatoes", "tomato": "tomatoes"}
    if noun in irregular:
        return irregular[noun]
    if noun.endswith(("s", "x", "z", "ch", "sh")):
        return noun + "es"
    if noun.endswith("y") and noun[-2:-1] not in "aeiou":
        return noun[:-1] + "ies"
    return noun + "s"


def made_up_word(rng: random.Random, syllables: int | None = None) -> str:
    """A pronounceable word of 1-3 syllables that no word list holds: "velto", "brask"."""
    count = syllables or rng.choice((1, 2, 2, 2, 3))
    return "".join(rng.choice(_ONSETS) + rng.choice(_VOWELS) + rng.choice(_CODAS) for _ in range(count))
