"""Word lists and fact tables the task generators draw from, all written for this project.

Everything here is original text (no third-party corpus), so it ships with the repository
under its licence and is available on a fresh machine with nothing downloaded.

    from prompts.tasks.bank import TOPICS, CAPITALS
"""

from __future__ import annotations

NUMBER_WORDS = {
    1: "one", 2: "two", 3: "three", 4: "four", 5: "five", 6: "six", 7: "seven", 8: "eight", 9: "nine", 10: "ten",
}

NAMES = (
    "Mia", "Leo", "Ava", "Sam", "Nora", "Ben", "Ella", "Omar", "Lina", "Tom", "Ivy", "Max", "Zoe", "Eli", "Ruby",
    "Noah", "Maya", "Luca", "Iris", "Finn", "Hana", "Jack", "Rosa", "Theo", "Alma", "Ravi", "Kira", "Owen", "Lucy",
    "Adam", "Sara", "Yuki", "Paul", "Nina", "Hugo", "Emma", "Tariq", "Clara", "Felix", "Anya",
)
PRONOUNS = {name: ("she" if name in {
    "Mia", "Ava", "Nora", "Ella", "Lina", "Ivy", "Zoe", "Ruby", "Maya", "Iris", "Hana", "Rosa", "Alma", "Kira",
    "Lucy", "Sara", "Yuki", "Nina", "Emma", "Clara", "Anya",
} else "he") for name in NAMES}

# Countable things for word problems: (singular, plural).
OBJECTS = (
    ("apple", "apples"), ("book", "books"), ("marble", "marbles"), ("pencil", "pencils"), ("sticker", "stickers"),
    ("cookie", "cookies"), ("shell", "shells"), ("card", "cards"), ("coin", "coins"), ("stamp", "stamps"),
    ("flower", "flowers"), ("balloon", "balloons"), ("cupcake", "cupcakes"), ("toy car", "toy cars"),
    ("orange", "oranges"), ("egg", "eggs"), ("candle", "candles"), ("button", "buttons"), ("ribbon", "ribbons"),
    ("puzzle", "puzzles"),
)
CONTAINERS = (
    ("box", "boxes"), ("bag", "bags"), ("basket", "baskets"), ("jar", "jars"), ("tray", "trays"), ("crate", "crates"),
    ("drawer", "drawers"), ("shelf", "shelves"),
)

CITIES = (
    "Lisbon", "Oslo", "Cairo", "Lima", "Tokyo", "Dublin", "Nairobi", "Quito", "Madrid", "Seoul", "Vienna", "Hanoi",
    "Toronto", "Bogota", "Prague", "Athens", "Manila", "Dakar", "Helsinki", "Santiago",
)

# Acrostic line openers: adjectives that read well before a plural noun ("Calm waves ...").
LETTER_WORDS = {
    "A": ("Ancient", "Amber", "Awake", "Autumn", "Airy"),
    "B": ("Bright", "Brave", "Bold", "Blue", "Busy"),
    "C": ("Calm", "Clear", "Cold", "Curious", "Countless"),
    "D": ("Deep", "Distant", "Dark", "Dancing", "Drowsy"),
    "E": ("Endless", "Early", "Eager", "Evening", "Echoing"),
    "F": ("Fresh", "Faint", "Free", "Fading", "Friendly"),
    "G": ("Gentle", "Golden", "Green", "Glowing", "Graceful"),
    "H": ("Hidden", "Humble", "Hazy", "Happy", "Hushed"),
    "I": ("Idle", "Icy", "Inky", "Infinite", "Improbable"),
    "J": ("Jolly", "Joyful", "Jagged", "Jade", "Jubilant"),
    "K": ("Kind", "Keen", "Knotted", "Kindred", "Kingly"),
    "L": ("Little", "Lonely", "Lively", "Lazy", "Luminous"),
    "M": ("Misty", "Mellow", "Mighty", "Morning", "Merry"),
    "N": ("Nimble", "Noble", "Nightly", "Nearby", "Narrow"),
    "O": ("Old", "Open", "Olive", "Orange", "Ordinary"),
    "P": ("Pale", "Patient", "Playful", "Proud", "Peaceful"),
    "Q": ("Quiet", "Quick", "Quaint", "Quirky", "Quivering"),
    "R": ("Restless", "Rising", "Rustling", "Radiant", "Rough"),
    "S": ("Silver", "Soft", "Slow", "Shining", "Sleepy"),
    "T": ("Tiny", "Tender", "Tall", "Tireless", "Tangled"),
    "U": ("Unseen", "Upward", "Untamed", "Usual", "Urgent"),
    "V": ("Vast", "Vivid", "Velvet", "Violet", "Valiant"),
    "W": ("Wild", "Warm", "Wandering", "Weary", "Whispering"),
    "X": ("Xenial", "Xeric", "Xanthic", "Xyloid", "Xystic"),
    "Y": ("Young", "Yellow", "Yearning", "Youthful", "Yawning"),
    "Z": ("Zesty", "Zealous", "Zigzag", "Zany", "Zen"),
}

# Topics shared by acrostics, open instructions and short descriptions:
# name -> (plural nouns, verb phrases that follow a plural noun).
TOPICS = {
    "the ocean": (
        ("waves", "tides", "gulls", "shells", "currents", "whales"),
        ("roll toward the shore", "shine under the moon", "whisper in the dark", "carry salt and foam",
         "rise and fall all day", "sing of distant lands"),
    ),
    "the forest": (
        ("trees", "ferns", "owls", "paths", "roots", "leaves"),
        ("stand in the morning fog", "hold the old stories", "sway above the moss", "hide from the sun",
         "wait for the spring rain", "listen to the wind"),
    ),
    "the city": (
        ("streets", "lights", "trains", "towers", "crowds", "windows"),
        ("hum through the night", "glow above the traffic", "rush past the station", "wake before the sun",
         "shine in the rain", "never fall asleep"),
    ),
    "winter": (
        ("snowflakes", "mornings", "fires", "rivers", "pines", "nights"),
        ("fall without a sound", "crackle in the hearth", "freeze beneath the bridge", "wear a white coat",
         "stretch long and cold", "wait for warmer days"),
    ),
    "the mountains": (
        ("peaks", "cliffs", "valleys", "trails", "glaciers", "eagles"),
        ("touch the passing clouds", "catch the first light", "rest under the snow", "wind toward the summit",
         "echo with each call", "watch over the plains"),
    ),
    "the night sky": (
        ("stars", "planets", "comets", "clouds", "moons", "shadows"),
        ("drift above the hills", "blink in the silence", "trace their old paths", "glow over the sea",
         "guide the sailors home", "fade before the dawn"),
    ),
    "a garden": (
        ("roses", "bees", "tulips", "seeds", "vines", "butterflies"),
        ("open in the sun", "hum among the flowers", "climb the wooden fence", "wait beneath the soil",
         "dance in the breeze", "drink the morning dew"),
    ),
    "rain": (
        ("drops", "puddles", "clouds", "gutters", "storms", "umbrellas"),
        ("tap on the window", "gather in the street", "roll across the sky", "sing on the rooftops",
         "wash the dusty roads", "bloom along the path"),
    ),
    "the river": (
        ("waters", "stones", "fish", "boats", "banks", "reeds"),
        ("run toward the sea", "shine in the sunlight", "bend around the hills", "carry fallen leaves",
         "rest in quiet pools", "murmur through the town"),
    ),
    "autumn": (
        ("leaves", "apples", "winds", "geese", "fields", "evenings"),
        ("turn red and gold", "fall from the branches", "fly south in lines", "smell of wood smoke",
         "cool the sleepy hills", "come a little sooner"),
    ),
    "the desert": (
        ("dunes", "winds", "cacti", "lizards", "stars", "oases"),
        ("shift with every storm", "bake in the noon heat", "bloom after the rain", "rest in thin shade",
         "shine in the cold night", "wait beyond the sand"),
    ),
    "music": (
        ("songs", "drums", "strings", "voices", "melodies", "chords"),
        ("fill the empty room", "beat like a heart", "lift the tired soul", "echo down the hall",
         "carry old memories", "bring the crowd together"),
    ),
    "friendship": (
        ("friends", "laughs", "letters", "promises", "stories", "evenings"),
        ("stay through hard times", "fill the long afternoons", "travel across the years", "keep the door open",
         "warm the coldest days", "make the journey shorter"),
    ),
    "the morning": (
        ("birds", "kettles", "clocks", "sunbeams", "streets", "dreams"),
        ("call from the rooftops", "whistle in the kitchen", "tick toward the day", "climb across the floor",
         "slowly come alive", "fade with the light"),
    ),
    "machine learning": (
        ("models", "weights", "datasets", "gradients", "layers", "predictions"),
        ("learn from many examples", "settle after training", "guide the next update", "find hidden patterns",
         "grow better with data", "turn numbers into answers"),
    ),
    "the moon": (
        ("tides", "phases", "craters", "nights", "shadows", "silver beams"),
        ("follow its slow pull", "change from week to week", "keep their quiet secrets", "glow above the sea",
         "stretch across the field", "light the sleeping town"),
    ),
    "a library": (
        ("books", "shelves", "pages", "readers", "lamps", "stories"),
        ("wait to be opened", "hold a thousand worlds", "turn in the silence", "lean toward the light",
         "travel far from home", "remember every name"),
    ),
    "coffee": (
        ("beans", "cups", "mornings", "kettles", "aromas", "cafes"),
        ("roast until they crack", "warm the cold hands", "start the busy day", "steam on the counter",
         "drift across the room", "open before dawn"),
    ),
    "the summer": (
        ("days", "beaches", "fireflies", "picnics", "breezes", "storms"),
        ("stretch into the evening", "glow along the coast", "blink in the long grass", "gather under trees",
         "cool the warm skin", "roll in after noon"),
    ),
    "cats": (
        ("cats", "paws", "whiskers", "kittens", "tails", "naps"),
        ("sleep in the sunshine", "pad across the floor", "twitch at every sound", "chase a ball of yarn",
         "curl around the chair", "last the whole afternoon"),
    ),
}

# Haiku lines written to count 5 and 7 syllables: topic -> (five-syllable lines, seven-syllable lines).
HAIKU_LINES = {
    "machine learning": (
        ("Silent weights adjust", "Data flows like rain", "Patterns start to form", "Errors slowly fade"),
        ("Each small step lowers the loss", "The model learns from mistakes", "Numbers turn into meaning",
         "Gradients guide every change"),
    ),
    "the ocean": (
        ("Waves roll to the shore", "Salt wind on my face", "Gulls cry over foam", "Blue water shimmers"),
        ("The tide pulls the sand away", "Deep currents carry the light", "Shells rest in the morning sun",
         "A ship sails toward the dawn"),
    ),
    "rain": (
        ("Soft rain on the roof", "Gray clouds gather near", "Drops tap the window", "Puddles fill the street"),
        ("The garden drinks each small drop", "Umbrellas bloom on the street", "A cool wind follows the storm",
         "The whole town smells fresh and clean"),
    ),
    "autumn": (
        ("Red leaves drift and fall", "Cool winds fill the air", "Geese fly to the south", "Apples ripen now"),
        ("The hills turn orange and gold", "Smoke curls above the chimney", "Bare branches reach for the sky",
         "The fields rest beneath the mist"),
    ),
    "the mountains": (
        ("Snow rests on the peaks", "Eagles circle high", "Cold streams rush below", "Clouds touch the summit"),
        ("The trail climbs above the trees", "Old stone watches the valley", "First light paints the highest ridge",
         "A still lake holds the whole sky"),
    ),
    "the city": (
        ("Lights hum through the night", "Trains rush underground", "Crowds flow down the street", "Tall towers glitter"),
        ("Taxis wait beside the curb", "A window glows in the dark", "The bakery wakes at dawn",
         "Footsteps echo on the bridge"),
    ),
    "winter": (
        ("Snow falls without sound", "Cold wind in the pines", "Ice covers the pond", "Bare trees stand alone"),
        ("The fire crackles in the hearth", "Footprints vanish in the snow", "A gray sky hangs over town",
         "Warm soup waits on the table"),
    ),
    "the moon": (
        ("Pale moon over hills", "Silver light on waves", "The moon climbs slowly", "Soft glow on the field"),
        ("Its face changes week by week", "The tide follows its long pull", "Shadows stretch across the lawn",
         "An owl calls beneath its light"),
    ),
    "a garden": (
        ("Bees hum in the sun", "Roses open wide", "Seeds wait in the soil", "Green vines climb the fence"),
        ("The tulips lean to the light", "Morning dew rests on the leaves", "A butterfly finds the rose",
         "The gardener kneels down low"),
    ),
    "the forest": (
        ("Tall trees in the fog", "Ferns brush my ankles", "An owl calls softly", "Moss covers the stones"),
        ("Sunlight slips between the leaves", "The path winds into the dark", "Old roots hold the soft dark ground",
         "A deer listens and then runs"),
    ),
    "coffee": (
        ("Warm cup in my hands", "Steam curls from the mug", "Dark beans slowly roast", "The kettle whistles"),
        ("The kitchen smells of morning", "One sip and the day begins", "Sunlight falls across the cup",
         "The corner shop wakes up slow"),
    ),
    "the night sky": (
        ("Stars blink in silence", "A comet streaks by", "Dark sky over hills", "The planets wander"),
        ("The Milky Way spills its light", "A satellite crosses slow", "Old stars guide the sailors home",
         "Clouds drift across the bright moon"),
    ),
    "friendship": (
        ("Old friends laugh again", "A letter arrives", "Warm hands hold on tight", "We share the long road"),
        ("The kettle waits for our talk", "Years pass but the bond stays strong", "A call on a rainy night",
         "We carry each other home"),
    ),
    "cats": (
        ("A cat in the sun", "Soft paws on the floor", "Whiskers twitch and wait", "The kitten pounces"),
        ("A long nap on the warm chair", "The yarn rolls across the room", "Green eyes glow in the dark hall",
         "She purrs beside the window"),
    ),
}

# Short explanations, one fact per sentence; the first sentence answers the question.
# question -> sentences (each ends with a period; no abbreviations, so sentence counting is exact).
EXPLANATIONS = {
    "Why is the sky blue?": (
        "Sunlight contains every color of light.",
        "Air molecules scatter short blue waves much more than long red waves.",
        "This scattered blue light reaches our eyes from every direction in the sky.",
        "At sunset the light travels through more air, so more blue is scattered away.",
        "That is why evening skies often look orange and red.",
    ),
    "Why do leaves change color in autumn?": (
        "Leaves are green because of a pigment called chlorophyll.",
        "In autumn the days get shorter and trees stop making chlorophyll.",
        "As the green fades, yellow and orange pigments that were hidden become visible.",
        "Some trees also make red pigments from sugars trapped in the leaves.",
        "Finally the leaves fall so the tree can save water over winter.",
    ),
    "Why does the moon change shape?": (
        "The moon does not make its own light, it reflects sunlight.",
        "As the moon orbits the Earth, we see different parts of its sunlit half.",
        "When the sunlit side faces us we see a full moon.",
        "When it faces away we see a new moon.",
        "The whole cycle of phases takes about a month.",
    ),
    "How do plants make food?": (
        "Plants make food through a process called photosynthesis.",
        "Their leaves capture energy from sunlight.",
        "They take in carbon dioxide from the air and water from the soil.",
        "Using that energy, they turn water and carbon dioxide into sugar.",
        "Oxygen is released into the air as a result.",
    ),
    "Why do we have seasons?": (
        "The Earth is tilted on its axis.",
        "As it orbits the Sun, one half leans toward the Sun and then away from it.",
        "The half leaning toward the Sun gets more direct light and longer days.",
        "That half has summer while the other half has winter.",
        "Six months later the situation is reversed.",
    ),
    "How does a rainbow form?": (
        "A rainbow forms when sunlight passes through raindrops.",
        "Each drop bends the light as it enters and leaves.",
        "Different colors bend by different amounts, so the light spreads out.",
        "The drop also reflects the light back toward us.",
        "We see a rainbow when the Sun is behind us and rain is in front of us.",
    ),
    "Why is the ocean salty?": (
        "Rain slowly wears away rocks on land and carries minerals into rivers.",
        "Rivers bring those dissolved minerals to the ocean.",
        "When ocean water evaporates, the salt stays behind.",
        "Over millions of years the salt has built up.",
        "Vents on the sea floor add more minerals as well.",
    ),
    "How do bees make honey?": (
        "Bees collect sweet nectar from flowers.",
        "They store the nectar in a special stomach and carry it back to the hive.",
        "Inside the hive they pass the nectar from bee to bee, which adds enzymes.",
        "The bees fan the nectar with their wings until most of the water evaporates.",
        "The thick result is honey, which they seal in wax cells.",
    ),
    "Why do cats purr?": (
        "Cats purr by vibrating muscles in their throat as they breathe.",
        "They often purr when they feel calm and content.",
        "Mother cats purr to help their kittens find them.",
        "Cats also purr when they are hurt, which may help them soothe themselves.",
        "Scientists are still studying exactly why purring evolved.",
    ),
    "How does the heart work?": (
        "The heart is a muscle that pumps blood through the body.",
        "It has four chambers, two on the left and two on the right.",
        "The right side sends blood to the lungs to pick up oxygen.",
        "The left side pumps that oxygen rich blood to the rest of the body.",
        "Valves keep the blood flowing in one direction.",
    ),
    "Why do we need sleep?": (
        "Sleep gives the body time to rest and repair itself.",
        "During sleep the brain sorts and stores memories.",
        "Sleep also helps control mood and attention.",
        "People who sleep too little often find it hard to focus.",
        "Most adults need around seven to nine hours a night.",
    ),
    "How do airplanes fly?": (
        "Airplanes fly because their wings create lift.",
        "The shape and angle of a wing push air downward as the plane moves.",
        "Pushing air down pushes the wing up.",
        "Engines provide thrust that moves the plane forward fast enough.",
        "When lift is greater than the weight of the plane, it rises.",
    ),
    "Why does ice float?": (
        "Ice floats because it is less dense than liquid water.",
        "When water freezes, its molecules lock into an open pattern.",
        "That pattern takes up more space than the same water as a liquid.",
        "Less dense things float on denser ones.",
        "This is why lakes freeze from the top down.",
    ),
    "What causes thunder?": (
        "Thunder is caused by lightning.",
        "A lightning bolt heats the air around it in a fraction of a second.",
        "The hot air expands very quickly and creates a shock wave.",
        "We hear that shock wave as a loud rumble.",
        "Light travels faster than sound, so we see the flash first.",
    ),
    "Why do stars twinkle?": (
        "Stars twinkle because their light passes through moving air.",
        "The air around the Earth has layers of different temperatures.",
        "These layers bend the light slightly in changing directions.",
        "The star seems to flicker as its light shifts.",
        "From space, stars shine steadily without twinkling.",
    ),
    "How do computers store information?": (
        "Computers store information as bits, which are ones and zeros.",
        "Eight bits together form a byte.",
        "Memory chips hold bits as tiny electric charges.",
        "Disks and flash drives keep the data even when the power is off.",
        "Programs turn those bits back into text, pictures and sound.",
    ),
    "Why do birds migrate?": (
        "Birds migrate to find food and good places to raise their young.",
        "Many insects and fruits disappear in cold seasons.",
        "By flying to warmer places, birds can keep finding food.",
        "In spring they return to places with long days and plenty to eat.",
        "Some birds use the stars and the Earth's magnetic field to find their way.",
    ),
    "What is gravity?": (
        "Gravity is the force that pulls objects toward each other.",
        "The more mass an object has, the stronger its pull.",
        "Gravity keeps our feet on the ground.",
        "It also keeps the Moon in orbit around the Earth.",
        "The Sun's gravity holds all the planets in their paths.",
    ),
}

# Lists with a fact per item.  Category -> (items in their natural order, item -> facts).
LIST_CATEGORIES = {
    "planets of the solar system": {
        "Mercury": ("It is the smallest planet and the closest to the Sun.", "A year on Mercury lasts only 88 days."),
        "Venus": ("It is the hottest planet, with thick clouds that trap heat.", "Venus spins backwards compared with most planets."),
        "Earth": ("It is the only planet known to have life.", "About seventy percent of its surface is covered by water."),
        "Mars": ("It looks red because of rusty dust on its surface.", "It has the tallest volcano in the solar system."),
        "Jupiter": ("It is the largest planet in the solar system.", "Its Great Red Spot is a storm bigger than Earth."),
        "Saturn": ("It has the most famous rings of any planet.", "Saturn is so light that it would float in a giant bathtub."),
        "Uranus": ("It spins on its side as it orbits the Sun.", "It looks pale blue because of methane in its air."),
        "Neptune": ("It has the fastest winds in the solar system.", "It is the farthest planet from the Sun."),
    },
    "continents": {
        "Africa": ("It has more countries than any other continent.", "The Sahara, a huge hot desert, is in its north."),
        "Antarctica": ("It is the coldest continent on Earth.", "It is covered by a sheet of ice."),
        "Asia": ("It is the largest continent by area.", "More than half of all people live there."),
        "Australia": ("It is the smallest continent.", "Kangaroos and koalas live there."),
        "Europe": ("It has many countries close together.", "The Alps run across its middle."),
        "North America": ("It stretches from the Arctic to the tropics.", "The Great Lakes are on this continent."),
        "South America": ("The Amazon rainforest covers much of it.", "The Andes are the longest mountain range on land."),
    },
    "oceans": {
        "Pacific Ocean": ("It is the largest and deepest ocean.", "It covers about a third of the Earth."),
        "Atlantic Ocean": ("It separates the Americas from Europe and Africa.", "It is the second largest ocean."),
        "Indian Ocean": ("It is the warmest ocean.", "It lies between Africa, Asia and Australia."),
        "Southern Ocean": ("It circles Antarctica.", "It is home to many penguins and whales."),
        "Arctic Ocean": ("It is the smallest and shallowest ocean.", "Much of it is covered by ice."),
    },
    "colors of the rainbow": {
        "Red": ("It has the longest waves of visible light.", "It is always on the outside of the bow."),
        "Orange": ("It sits between red and yellow.", "It is the color of a ripe pumpkin."),
        "Yellow": ("It is the brightest color to our eyes.", "It is the color of sunflowers."),
        "Green": ("It is in the middle of the rainbow.", "It is the color of most leaves."),
        "Blue": ("It is the color of a clear sky.", "Blue light scatters easily in air."),
        "Indigo": ("It is a deep color between blue and violet.", "It is named after a plant used to dye cloth."),
        "Violet": ("It has the shortest waves of visible light.", "It is always on the inside of the bow."),
    },
    "animals": {
        "Elephant": ("It is the largest land animal.", "It uses its trunk to drink and to grab food."),
        "Giraffe": ("It is the tallest animal in the world.", "Its tongue can be longer than a ruler."),
        "Octopus": ("It has eight arms and three hearts.", "It can change color to hide."),
        "Penguin": ("It is a bird that cannot fly but swims well.", "Most penguins live in the southern half of the world."),
        "Cheetah": ("It is the fastest land animal.", "It can reach its top speed in a few seconds."),
        "Owl": ("It can turn its head very far around.", "It hunts quietly at night."),
        "Dolphin": ("It breathes air through a hole on top of its head.", "It uses clicks and whistles to talk."),
        "Bee": ("It makes honey from flower nectar.", "It does a dance to tell other bees where food is."),
        "Kangaroo": ("It carries its baby in a pouch.", "It moves by hopping on strong back legs."),
        "Snail": ("It carries its shell on its back.", "It moves on a trail of slime."),
        "Whale": ("The blue whale is the largest animal that has ever lived.", "Some whales sing long songs."),
        "Bat": ("It is the only mammal that can truly fly.", "Many bats find food by listening to echoes."),
        "Frog": ("It starts life as a tadpole in water.", "It can breathe through its skin."),
        "Camel": ("It can go a long time without drinking water.", "Its hump stores fat, not water."),
        "Parrot": ("It can copy human words.", "It uses its beak like a third foot when climbing."),
    },
    "fruits": {
        "Apple": ("There are thousands of kinds of apples.", "Apples float in water."),
        "Banana": ("It grows in bunches called hands.", "It is a good source of potassium."),
        "Orange": ("It is full of vitamin C.", "Its peel has tiny pockets of oil."),
        "Strawberry": ("It wears its seeds on the outside.", "It is a member of the rose family."),
        "Pineapple": ("It takes about two years to grow.", "It is made of many small berries joined together."),
        "Mango": ("It is the national fruit of India.", "Its tree can live for hundreds of years."),
        "Grape": ("It grows in clusters on vines.", "Dried grapes are called raisins."),
        "Watermelon": ("It is mostly water.", "Its seeds can be roasted and eaten."),
        "Lemon": ("It tastes very sour.", "Its juice can keep cut apples from turning brown."),
        "Cherry": ("It has a hard stone in the middle.", "Cherry trees have pink and white blossoms."),
    },
}
FULL_LISTS = ("planets of the solar system", "continents", "oceans", "colors of the rainbow")  # "List the N ..."
SAMPLED_LISTS = ("animals", "fruits")  # "List N ..." draws a subset

# Story building blocks: opening sentences (repeated at the end) and middle sentences.
STORY_OPENINGS = (
    "{name} always kept a lantern by the door.",
    "The old clock in the hall had stopped at midnight.",
    "Every morning, {name} walked to the end of the pier.",
    "The bakery on the corner never closed its door.",
    "{name} found a small key in the garden.",
    "The last train of the night was always late.",
    "Nobody in the village had ever seen the lighthouse dark.",
    "{name} counted the stars before going to sleep.",
    "The red bicycle leaned against the same tree every day.",
    "There was a letter waiting on the kitchen table.",
    "The river was louder than usual that night.",
    "{name} kept a notebook full of unfinished maps.",
)
STORY_MIDDLES = (
    "One evening a storm rolled in from the sea.",
    "{Pronoun} heard a soft knock that nobody else noticed.",
    "The neighbors said it was only the wind.",
    "{Pronoun} decided to find out what was going on.",
    "A stranger in a gray coat asked for directions.",
    "Inside an old box {pronoun} found a faded photograph.",
    "The photograph showed the same street, many years ago.",
    "For a long moment nobody said a word.",
    "Then a small dog ran out from behind the fence.",
    "{Pronoun} followed it through the quiet streets.",
    "By morning the rain had stopped and the sky was clear.",
    "The town slowly woke up as if nothing had happened.",
    "{Pronoun} smiled and put the kettle on.",
    "Some things are meant to stay a mystery.",
    "A bird sang from the roof of the empty house.",
    "{Pronoun} wrote everything down before it could fade.",
    "The next day everything looked a little brighter.",
    "Somewhere far away a bell began to ring.",
)

# Factual recall table: (question templates, (subject, answer) pairs, answer sentence template).
CAPITALS = (
    ("France", "Paris"), ("Japan", "Tokyo"), ("Italy", "Rome"), ("Spain", "Madrid"), ("Germany", "Berlin"),
    ("Egypt", "Cairo"), ("Canada", "Ottawa"), ("Kenya", "Nairobi"), ("Peru", "Lima"), ("Norway", "Oslo"),
    ("Portugal", "Lisbon"), ("Greece", "Athens"), ("Ireland", "Dublin"), ("Austria", "Vienna"),
    ("Russia", "Moscow"), ("China", "Beijing"), ("India", "New Delhi"), ("Mexico", "Mexico City"),
    ("Argentina", "Buenos Aires"), ("Australia", "Canberra"), ("Brazil", "Brasilia"), ("Chile", "Santiago"),
    ("Sweden", "Stockholm"), ("Finland", "Helsinki"), ("Poland", "Warsaw"), ("Turkey", "Ankara"),
    ("Thailand", "Bangkok"), ("Vietnam", "Hanoi"), ("Cuba", "Havana"), ("Ghana", "Accra"),
)
CHEMICAL_SYMBOLS = (
    ("hydrogen", "H"), ("helium", "He"), ("carbon", "C"), ("nitrogen", "N"), ("oxygen", "O"), ("sodium", "Na"),
    ("iron", "Fe"), ("gold", "Au"), ("silver", "Ag"), ("copper", "Cu"), ("calcium", "Ca"), ("neon", "Ne"),
    ("potassium", "K"), ("lead", "Pb"), ("zinc", "Zn"),
)
ANIMAL_YOUNG = (
    ("cat", "kitten"), ("dog", "puppy"), ("cow", "calf"), ("sheep", "lamb"), ("horse", "foal"), ("frog", "tadpole"),
    ("goat", "kid"), ("duck", "duckling"), ("bear", "cub"), ("kangaroo", "joey"), ("swan", "cygnet"),
    ("owl", "owlet"), ("deer", "fawn"), ("pig", "piglet"), ("goose", "gosling"),
)
OPPOSITES = (
    ("hot", "cold"), ("big", "small"), ("fast", "slow"), ("early", "late"), ("light", "dark"), ("happy", "sad"),
    ("open", "closed"), ("full", "empty"), ("high", "low"), ("old", "young"), ("loud", "quiet"), ("wet", "dry"),
    ("strong", "weak"), ("rich", "poor"), ("hard", "soft"),
)
LEG_COUNTS = (
    ("spider", "eight"), ("insect", "six"), ("dog", "four"), ("bird", "two"), ("octopus", "eight"), ("ant", "six"),
    ("horse", "four"), ("chicken", "two"), ("crab", "ten"), ("beetle", "six"),
)

# JSON entities: field -> (json type, value pool).  Arrays hold strings.
JSON_ENTITIES = {
    "person": {
        "name": ("string", NAMES),
        "age": ("integer", tuple(range(18, 80))),
        "city": ("string", CITIES),
        "is_student": ("boolean", (True, False)),
        "hobbies": ("array", ("reading", "chess", "hiking", "painting", "cooking", "music", "running", "gardening")),
    },
    "book": {
        "title": ("string", ("The Quiet Harbor", "A Map of Rain", "Northern Lights", "The Glass Garden",
                             "Letters from Nowhere", "The Last Lantern", "Small Wonders", "River of Stars")),
        "author": ("string", tuple(f"{n} {s}" for n in NAMES[:10] for s in ("Stone", "Reed", "Vale", "Hart"))),
        "year": ("integer", tuple(range(1950, 2025))),
        "pages": ("integer", tuple(range(90, 700, 7))),
        "available": ("boolean", (True, False)),
    },
    "pet": {
        "name": ("string", ("Biscuit", "Luna", "Pepper", "Milo", "Coco", "Shadow", "Daisy", "Ziggy", "Olive", "Rex")),
        "species": ("string", ("cat", "dog", "rabbit", "parrot", "hamster", "turtle", "goldfish")),
        "age": ("integer", tuple(range(1, 16))),
        "vaccinated": ("boolean", (True, False)),
        "toys": ("array", ("ball", "rope", "bell", "mouse", "bone", "feather", "tunnel")),
    },
    "product": {
        "name": ("string", ("desk lamp", "water bottle", "backpack", "notebook", "headphones", "umbrella", "mug")),
        "price": ("number", (4.99, 9.5, 12.75, 19.99, 24.0, 35.5, 49.99, 89.0)),
        "in_stock": ("boolean", (True, False)),
        "quantity": ("integer", tuple(range(0, 200))),
        "colors": ("array", ("black", "white", "red", "blue", "green", "gray", "yellow")),
    },
    "city": {
        "name": ("string", CITIES),
        "country": ("string", tuple(c for c, _ in CAPITALS)),
        "population": ("integer", tuple(range(150000, 9000000, 37000))),
        "coastal": ("boolean", (True, False)),
        "landmarks": ("array", ("old bridge", "central park", "cathedral", "harbor", "museum", "market", "tower")),
    },
    "movie": {
        "title": ("string", ("Paper Moons", "The Long Summer", "Echo Valley", "Blue Horizon", "Night Train",
                             "The Clockmaker", "Open Skies")),
        "year": ("integer", tuple(range(1960, 2025))),
        "rating": ("number", (5.5, 6.1, 6.8, 7.2, 7.9, 8.4, 9.0)),
        "genres": ("array", ("drama", "comedy", "mystery", "adventure", "romance", "science fiction")),
        "sequel": ("boolean", (True, False)),
    },
}

# Open-ended instructions: occasions and activities for notes and tips.
GIFTS = ("the flowers", "the book", "the birthday card", "the homemade jam", "the warm scarf", "your help last week")
ACTIVITIES = {
    "studying": ("Study in short sessions with breaks in between.", "Explain the topic out loud as if teaching a friend.",
                 "Put your phone in another room.", "Review your notes the next day."),
    "sleeping better": ("Go to bed at the same time every night.", "Keep the bedroom cool and dark.",
                        "Avoid screens in the hour before bed.", "Skip coffee in the afternoon."),
    "learning to cook": ("Start with a few simple recipes.", "Read the whole recipe before you begin.",
                         "Taste as you go.", "Keep your knives sharp and your counter clean."),
    "running": ("Start slowly and build up your distance each week.", "Wear shoes that fit well.",
                "Drink water before and after you run.", "Rest when something hurts."),
    "saving money": ("Write down what you spend each day.", "Set aside a little money as soon as you are paid.",
                     "Wait a day before buying anything you do not need.", "Cook at home more often."),
    "writing": ("Write a little every day.", "Finish a rough draft before you edit.", "Read your work out loud.",
                "Cut every word that does not help."),
    "gardening": ("Learn how much sun each plant needs.", "Water in the early morning.",
                  "Pull weeds while they are small.", "Add compost to feed the soil."),
    "public speaking": ("Practice in front of a friend.", "Slow down and breathe between points.",
                        "Know your first sentence by heart.", "Look at a few friendly faces in the room."),
}
SHOPS = ("bakery", "bicycle shop", "bookstore", "coffee shop", "flower shop", "toy store", "music school", "pet shop")
SLOGAN_WORDS = {
    "bakery": ("bread", "fresh", "warm", "morning"),
    "bicycle shop": ("ride", "wheels", "road", "free"),
    "bookstore": ("stories", "pages", "worlds", "read"),
    "coffee shop": ("cup", "morning", "warm", "brew"),
    "flower shop": ("bloom", "petals", "color", "fresh"),
    "toy store": ("play", "fun", "smile", "games"),
    "music school": ("song", "rhythm", "play", "learn"),
    "pet shop": ("friends", "paws", "care", "happy"),
}
