"""Answers for everyday question shapes: why, how, tips, what makes a good X, favourites, suggestions.

Written for this project.  A 10M-parameter model cannot know facts about whatever a visitor
asks; what it can learn is to answer each *shape* of question in a few plain, fluent sentences
that carry the asked subject along.  So these are answer patterns, filled with the subject (and
with `is`/`are`, `it`/`they` agreeing with it, see open_english.fill), not a list of prompts.

Keys in the sentences: {x} the subject as asked ("dogs", "a clock"), {X} capitalised, {x_bare}
without its article, {be} is/are, {it} it/they, {its} its/their, {them} it/them, {does} does/do,
{has} has/have; {vp} a verb phrase ("read books").
"""

from __future__ import annotations

# "Why is X important?": a reason by kind, then one more sentence.
WHY_IMPORTANT = {
    "animal": ("{X} {be} important because {it} {be} part of the web of life that keeps nature in balance.",
               "We need {x} because every living thing depends on others, and {it} {be} one of them.",
               "{X} {be} important to nature and to the people who study {them}."),
    "place": ("{X} {be} important because people live, work, learn or rest there.",
              "{X} {be} important because {it} {be} full of life, history and memories.",
              "We need places like {x} because they bring people together."),
    "nature": ("{X} {be} important because life on Earth depends on {it} in many ways.",
               "We need {x} because {it} {be} part of the cycle that keeps our planet alive.",
               "{X} {be} important because {it} can shape the weather, the land and the lives of plants and animals."),
    "thing": ("{X} {be} important because {it} can make everyday tasks easier and faster.",
              "We need {x} because {it} can save us time and help us do things we could not do by hand.",
              "{X} {be} important because so many people use {it} at home, at school and at work."),
    "food": ("{X} {be} important because {it} can give the body energy and make a meal feel like home.",
             "We need food like {x} to stay strong, and sharing {it} brings people together.",
             "{X} {be} important in many kitchens because {it} can be simple, filling and good for us."),
    "idea": ("{X} {be} important because {it} can shape how we live, learn and get along.",
             "We need {x} because a life without {it} would be poorer and harder.",
             "{X} {be} important because {it} helps us understand ourselves and the world."),
    "person": ("{X} {be} important because the work {it} {does} helps other people every day.",
               "Every community needs {x}, because so many people depend on {them}.",
               "{X} {be} important because {it} can change someone's life for the better."),
    "activity": ("{X} {be} important because {it} can keep us healthy, happy and connected to others.",
                 "{X} can matter more than it seems: {it} can teach patience and bring people together.",
                 "{X} {be} important because {it} gives us a break from routine and something to look forward to."),
}

# "Why do people <vp>?"
WHY_PEOPLE = ("People {vp} for many reasons: it can bring them joy, comfort or a sense of purpose.",
              "Many people {vp} because it helps them relax and feel good.",
              "People {vp} because it can make everyday life richer, easier or more fun.",
              "Most people who {vp} say it makes them happier and helps them connect with others.")
WHY_MORE = ("For some it is a habit, and for others it is a small daily pleasure.",
            "It can also be a way to spend time with friends and family.",
            "Like most habits, it means something a little different to each person.",
            "Some do it to learn, some to rest, and some simply because they love it.")
PEOPLE_DO = ("drink tea", "keep diaries", "travel", "read books", "play games", "learn new languages",
             "watch movies", "plant trees", "go camping", "listen to music", "live in cities", "save money",
             "tell stories", "visit museums", "play sports", "write poems", "keep gardens", "take photos",
             "go to the beach", "bake bread", "collect stamps", "ride bicycles", "sing in choirs", "dance",
             "volunteer", "watch the stars", "celebrate birthdays", "go fishing", "knit", "paint", "run marathons",
             "climb mountains", "keep bees", "learn to cook", "play chess", "go to concerts", "write letters",
             "decorate their homes", "go for walks", "take naps")

# "How does X work?": the definition when known, then one of these.
HOW_WORKS = {
    "thing": ("Each part of {x} has a small job, and together the parts make {it} work.",
              "The idea behind {x} is simple, even if the details take time to learn.",
              "People improved {x} step by step over many years until {it} worked the way {it} {does} today."),
    "nature": ("{X} {be} the result of natural forces such as heat, water, air and gravity working together.",
               "Scientists explain {x} with a few simple ideas about energy and movement.",
               "{X} follows the same natural laws as everything else on Earth."),
    "idea": ("{X} {be} built from many small steps that add up to something bigger.",
             "The basic idea of {x} is simple, and the details grow from there.",
             "{X} depends on people, rules and habits working together."),
}
# "How do I <vp>?"
HOW_TO = ("To {vp}, start small and take it one step at a time.",
          "The best way to {vp} is to begin with the basics and practice a little every day.",
          "If you want to {vp}, first find out what you need, then make a simple plan.")
HOW_TO_MORE = ("Ask someone with experience for help when you get stuck.",
               "Be patient with yourself: everyone starts as a beginner.",
               "Keep notes on what works, and do a little more each time.",
               "Watch how others do it, then try it yourself.")
PEOPLE_LEARN = ("learn to swim", "make new friends", "bake bread", "grow tomatoes", "save money",
                "learn a new language", "get better at chess", "start running", "write a poem", "fall asleep faster",
                "stay focused", "cook rice", "plant a tree", "learn to draw", "keep a plant alive", "learn to code",
                "play the guitar", "study for an exam", "tidy my room", "wake up early", "speak in public",
                "train a puppy", "ride a bike", "make pancakes", "build a birdhouse", "read more books",
                "learn to juggle", "drink more water", "take better photos", "start a garden")

# "Give me some tips for X"
TIPS = ("plan ahead", "stay calm", "take your time", "be yourself", "ask questions", "practice first",
        "get enough sleep the night before", "keep it simple", "listen carefully", "prepare what you need the day before",
        "arrive a little early", "learn from every try", "take short breaks", "stay positive", "bring some water",
        "write down what matters", "start with the easy parts", "ask for help when you need it")
TIPS_INTRO = ("Here are a few tips for {x}: {t1}, {t2} and {t3}.", "For {x}, try to {t1}, {t2} and {t3}.",
              "A few things help with {x}: {t1}, {t2}, and {t3}.")
TIPS_MORE = ("Most of all, enjoy it and learn as you go.", "Small steps add up, so don't worry about being perfect.",
             "With a little practice, it gets easier every time.", "And remember that everyone feels nervous at first.")
TIP_SUBJECTS = ("a first day at school", "a long flight", "a camping trip", "a math test", "a school play",
                "a family trip", "a presentation", "a marathon", "moving house", "a new job", "public speaking",
                "learning to cook", "a road trip", "a picnic", "a birthday party", "a hike", "staying healthy",
                "saving money", "writing an essay", "studying", "a wedding speech", "a first date", "a swim race",
                "gardening", "working from home", "a driving test", "a music exam", "meeting new people")

# "What makes a good X?": qualities by role; anything else gets GOOD_ANY.
GOOD = {
    "teacher": ("patient", "clear", "kind", "curious", "fair"), "leader": ("honest", "fair", "calm", "brave", "clear"),
    "neighbor": ("friendly", "helpful", "respectful", "quiet", "kind"), "doctor": ("careful", "kind", "honest", "calm"),
    "coach": ("encouraging", "patient", "fair", "demanding"), "team member": ("reliable", "helpful", "honest", "cheerful"),
    "writer": ("curious", "clear", "patient", "honest"), "story": ("surprising", "clear", "exciting", "heartfelt"),
    "book": ("well written", "surprising", "memorable", "honest"), "meal": ("fresh", "simple", "tasty", "shared"),
    "password": ("long", "random", "hard to guess", "used only once"), "photo": ("sharp", "well lit", "simple", "honest"),
    "parent": ("loving", "patient", "fair", "present"), "student": ("curious", "hardworking", "organized", "patient"),
    "boss": ("fair", "clear", "supportive", "honest"), "listener": ("patient", "quiet", "attentive", "kind"),
    "roommate": ("tidy", "considerate", "friendly", "honest"), "song": ("catchy", "honest", "simple", "moving"),
    "presentation": ("clear", "short", "well prepared", "lively"), "team": ("united", "honest", "focused", "supportive"),
}
GOOD_ANY = ("reliable", "simple", "well made", "sturdy", "easy to use", "good value")
# "What makes a good X?" for any noun of these kinds (training/wordnet.py's open subjects): qualities by kind.
GOOD_BY_KIND = {
    "person": ("kind", "honest", "patient", "reliable", "fair", "caring", "a good listener"),
    "thing": GOOD_ANY,
    "place": ("safe", "clean", "welcoming", "easy to reach", "well looked after", "full of life"),
    "food": ("fresh", "tasty", "simple to make", "good for you", "made with care"),
    "animal": ("healthy", "calm", "friendly", "well cared for", "gentle"),
}
GOOD_MORE = ("It also helps to keep learning and to care about the people around you.",
             "None of these take special talent, just care and practice.",
             "Most of all, a good one makes life a little easier for others.")

# "What is your favorite X?": X -> (picks, why).
FAVORITES = {
    "color": (("blue", "green", "yellow", "deep red", "orange"), "it reminds me of the sky, fresh leaves and warm days"),
    "animal": (("the owl", "the dolphin", "the fox", "the elephant", "the cat"), "it is clever, graceful and a little mysterious"),
    "food": (("fresh bread", "tomato soup", "pasta", "rice with vegetables", "apple pie"), "it is simple, warm and always welcome"),
    "fruit": (("mango", "strawberries", "peaches", "apples", "oranges"), "it is sweet, fresh and full of color"),
    "flower": (("the sunflower", "the tulip", "the rose", "the daisy", "lavender"), "it is bright and cheerful and always makes me smile"),
    "time of day": (("early morning", "sunset", "late evening", "noon"), "the light is soft and the world feels calm"),
    "sport": (("swimming", "football", "tennis", "cycling", "basketball"), "it is fun, fast and good for the body"),
    "instrument": (("the piano", "the guitar", "the violin", "the drums", "the flute"), "it can sound gentle or powerful"),
    "place": (("the seaside", "a quiet library", "the mountains", "a small park", "a busy market"), "it always feels peaceful and full of life"),
    "holiday": (("a trip to the sea", "a winter holiday", "a summer festival", "a long weekend"), "it means time with the people I love"),
    "game": (("chess", "hide and seek", "card games", "puzzles"), "it is simple to learn but always a little different"),
    "weather": (("a light rain", "a clear sunny day", "fresh snow", "a cool breeze"), "it makes the world look new"),
    "drink": (("hot chocolate", "lemonade", "fresh orange juice", "mint tea"), "it is warm or cool at just the right moment"),
    "bird": (("the robin", "the owl", "the parrot", "the swallow"), "it sings, flies and seems to know the way"),
}

# "What should I <vp>?": vp -> suggestions.
SUGGESTIONS = {
    "eat for breakfast": ("oatmeal with fruit", "eggs on toast", "yogurt with honey", "a banana and some nuts"),
    "read next": ("a classic adventure novel", "a book of short stories", "a good mystery", "a book about nature"),
    "do this weekend": ("go for a long walk", "visit a museum", "cook something new", "call an old friend"),
    "watch tonight": ("a light comedy", "a nature documentary", "an old classic film", "a funny cartoon"),
    "plant in my garden": ("tomatoes", "sunflowers", "mint and basil", "strawberries"),
    "name my dog": ("Max", "Luna", "Biscuit", "Pepper"), "name my cat": ("Milo", "Luna", "Shadow", "Ginger"),
    "bring to a picnic": ("sandwiches", "fresh fruit", "lemonade", "a blanket and a ball"),
    "learn next": ("a new language", "a musical instrument", "cooking", "a little coding"),
    "play with my friends": ("a board game", "football in the park", "charades", "a card game"),
    "give my friend for her birthday": ("a good book", "a plant", "homemade cookies", "a handwritten card"),
    "wear to a party": ("something comfortable", "a bright shirt", "your favorite jacket", "simple shoes you can dance in"),
    "do when I feel bored": ("take a walk", "read a book", "draw something", "learn a new song"),
    "pack for a beach trip": ("sunscreen", "a towel", "water", "a hat"),
    "drink on a hot day": ("cold water", "iced tea", "lemonade", "fresh fruit juice"),
    "bake this weekend": ("banana bread", "simple cookies", "a lemon cake", "cinnamon rolls"),
}
SUGGEST_INTRO = ("You could try {s1}, {s2} or {s3}.", "How about {s1}? {S2} or {s3} would also be good.",
                 "A few ideas: {s1}, {s2} or {s3}.", "I would suggest {s1}, or maybe {s2}.")
SUGGEST_MORE = ("Pick whatever sounds most fun to you.", "Start with the one that feels easiest.",
                "Any of them is a good choice.", "Try one, and if you like it, try the next.")

# Scenes to describe: "a rainy evening in an old city" and the like.
SCENE_WEATHER = ("rainy", "snowy", "sunny", "foggy", "windy", "quiet", "busy", "cold", "warm", "stormy", "misty")
SCENE_TIMES = ("morning", "evening", "night", "day", "afternoon", "weekend", "winter day", "summer night", "spring morning")
SCENE_PLACES = ("in the mountains", "by the sea", "in a big city", "in a village", "at the market", "in the forest",
                "at a train station", "in the park", "at home", "on a farm", "in an old town", "by the river",
                "at school", "in the desert", "on an island", "at the harbor", "in a small cafe")
SCENE_SENTENCES = ("The air feels fresh, and everything seems to move a little slower.",
                   "People hurry past, but a few stop to look around and smile.",
                   "The light changes softly, and the sounds of the day fade in and out.",
                   "It is the kind of time that makes you want to sit, watch and remember.",
                   "Small details stand out: a door opening, a bird calling, footsteps on the ground.",
                   "There is a calm feeling, as if the whole place is taking a deep breath.")
