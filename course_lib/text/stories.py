"""The course's story generator: short, procedurally generated English stories, the same bytes everywhere.

Chapter 1 ("Pretraining objectives") trains on them. Each story has consistent characters,
objects and places and simple cause and effect ("Mia dropped the cup, so the cup broke."), in the
spirit of TinyStories (Eldan & Li 2023). The generator is pure Python and uses only
``random.Random(seed).random()``, whose sequence Python guarantees across versions, so the same
seed gives the same stories on every machine. :mod:`course_lib.text.data` splits them into the
course corpus.
"""

from __future__ import annotations

import ast
import hashlib
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from random import Random
from typing import Any

__all__ = [
    "CORPUS_VERSION",
    "DEFAULT_SEED",
    "N_STORIES",
    "corpus_sha256",
    "generate_stories",
    "generator_vocabulary",
]

#: Bump this whenever the generator changes its output; caches are keyed by it.
CORPUS_VERSION = "course-stories-v1"
#: Seed of the built-in corpus.
DEFAULT_SEED = 2024
#: Number of stories in the built-in corpus (about 2 MB of text).
N_STORIES = 6000

# Every word the generator can write appears in a string literal of a ``_W_*`` table or of a
# ``_plot_*`` / ``_say_*`` function below; ``generator_vocabulary()`` reads them from this file's
# source, so a test can check that the corpus only uses those words.

_W_GIRLS = (
    "Mia", "Emma", "Lily", "Zoe", "Ava", "Nora", "Ella", "Ruby", "Lucy", "Chloe", "Grace",
    "Hannah", "Sofia", "Isla", "Maya", "Alice", "Clara", "Rosa", "Amara", "Leila", "Priya",
    "Anna", "Julia", "Sara", "Olivia", "Ivy", "Hazel", "Stella", "Violet", "Luna", "Aria",
    "Layla", "Naomi", "Eva", "Ada", "Iris", "Daisy", "Fiona", "Kira", "Yara", "Mei", "Nina",
    "Tara", "Elsa", "Molly", "Rita", "Wendy", "Paula", "Greta", "Lena", "Aisha", "Farah",
    "Hana", "Ines", "Jade", "Keiko", "Lola", "Maria", "Noor", "Selma", "Abigail", "Beatrice",
    "Camila", "Delia", "Esther", "Freya", "Gemma", "Helena", "Imani", "Josephine", "Kamala",
    "Lucia", "Matilda", "Nadia", "Odette", "Penelope", "Quinn", "Rebecca", "Samira", "Thea",
    "Ursula", "Valentina", "Willa", "Ximena", "Yasmin", "Zara", "Adele", "Bianca", "Celeste",
    "Dorothy", "Eleanor", "Florence", "Gloria", "Harriet", "Ingrid", "Juniper", "Katarina",
    "Lorena", "Miriam", "Nell", "Ophelia", "Phoebe", "Rosalind", "Sabrina", "Tamara", "Uma",
    "Vera", "Winnie", "Yvonne", "Zelda", "Annika", "Bettina", "Cordelia", "Dagny", "Edith",
    "Fatima", "Georgia", "Heidi", "Isadora", "Jolene", "Kalinda", "Lavinia", "Marisol",
    "Nefertari", "Oriana", "Paloma", "Roxanne", "Sunita", "Tatiana", "Verity", "Wilhelmina",
)
_W_BOYS = (
    "Leo", "Sam", "Max", "Ben", "Tom", "Jack", "Noah", "Liam", "Omar", "Ravi", "Finn", "Hugo",
    "Oscar", "Theo", "Eli", "Jonas", "Mateo", "Ali", "Kofi", "Ivan", "Pablo", "Felix", "Arlo",
    "Milo", "Owen", "Ethan", "Lucas", "Adam", "David", "Henry", "Jamal", "Kenji", "Marco",
    "Nico", "Otto", "Peter", "Ryan", "Simon", "Victor", "Yusuf", "Bruno", "Carlos", "Dylan",
    "Emil", "Gabriel", "Hassan", "Isaac", "Joel", "Karl", "Luca", "Malik", "Nathan", "Oliver",
    "Paolo", "Rafael", "Sami", "Tariq", "Umar", "Wes", "Zane", "Abdul", "Barnaby", "Cedric",
    "Desmond", "Edmund", "Fernando", "Gideon", "Horatio", "Ignatius", "Jasper", "Kwame",
    "Leopold", "Montgomery", "Nikolai", "Obadiah", "Percival", "Quentin", "Reginald",
    "Sebastian", "Thaddeus", "Ulysses", "Vincent", "Winston", "Xavier", "Yannick", "Zachary",
    "Alistair", "Benedict", "Cornelius", "Dominic", "Ezekiel", "Frederick", "Gustav",
    "Humphrey", "Ishmael", "Jeremiah", "Kristof", "Lysander", "Maximilian", "Napoleon",
    "Octavian", "Phineas", "Rupert", "Solomon", "Tobias", "Wolfgang", "Ambrose", "Bartholomew",
    "Casimir", "Dashiell", "Evander", "Fitzgerald", "Griffin", "Hamish", "Ivor", "Jebediah",
    "Kingsley", "Lorenzo", "Mortimer", "Nathaniel", "Orlando", "Piers", "Roderick", "Silas",
    "Tristan", "Valentino", "Wallace", "Augustin", "Bertrand", "Clement", "Duncan", "Emrys",
)
_W_ADULTS = (
    ("Mom", "she"), ("Dad", "he"), ("Grandma", "she"), ("Grandpa", "he"),
    ("Aunt Rosa", "she"), ("Uncle Ben", "he"), ("Aunt May", "she"), ("Uncle Joe", "he"),
    ("Mrs. Green", "she"), ("Mr. Brown", "he"), ("Mrs. Lopez", "she"), ("Mr. Chen", "he"),
    ("Mrs. Whitfield", "she"), ("Mr. Okonkwo", "he"), ("Mrs. Castellano", "she"),
    ("Mr. Fitzpatrick", "he"), ("Mrs. Nakamura", "she"), ("Mr. Lindqvist", "he"),
    ("Mrs. Abernathy", "she"), ("Mr. Delacroix", "he"), ("Mrs. Kowalski", "she"),
    ("Mr. Thornbury", "he"), ("Mrs. Villanueva", "she"), ("Mr. Hargreaves", "he"),
)
_W_TEACHERS = (
    ("Miss Hill", "she"), ("Mr. Park", "he"), ("Mrs. Gray", "she"), ("Mr. Stone", "he"),
    ("Miss Rivera", "she"), ("Mr. Adams", "he"), ("Miss Pemberton", "she"),
    ("Mr. Achebe", "he"), ("Mrs. Sorensen", "she"), ("Mr. Montague", "he"),
    ("Miss Quigley", "she"), ("Mr. Ramirez", "he"), ("Mrs. Blackwood", "she"),
    ("Mr. Hollingsworth", "he"),
)
_W_PRONOUNS = {
    "she": ("she", "her", "her", "herself"),
    "he": ("he", "him", "his", "himself"),
}
_W_COLOURS = (
    "red", "blue", "green", "yellow", "orange", "purple", "pink", "white", "black", "brown",
    "gray", "golden", "silver",
)
_W_SIZES = ("little", "small", "big", "tiny", "large", "old", "new", "shiny", "pretty")
_W_NUMBERS = (
    "zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
    "eleven", "twelve",
)
_W_ORDINAL_DAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
_W_OPENINGS = (
    "One day", "One morning", "One sunny morning", "One afternoon", "One evening",
    "Once upon a time", "Last summer", "Early one morning", "On a cold winter day",
    "On a warm spring day", "After school", "On a quiet afternoon", "Last week",
    "On a bright autumn day", "Before breakfast",
)
_W_DAY_OPENINGS = ("On", "Last", "Early on", "Late on")
# Fragile things: (noun, verb of breaking, what it held).
_W_FRAGILE = (
    ("cup", "broke", "full of milk"), ("plate", "broke", "with a sandwich on it"),
    ("glass", "shattered", "full of water"), ("vase", "broke", "full of flowers"),
    ("bowl", "cracked", "full of soup"), ("mug", "broke", "full of hot cocoa"),
    ("jar", "shattered", "full of honey"), ("lamp", "broke", "with a new bulb"),
    ("teapot", "cracked", "full of tea"), ("mirror", "cracked", "with a wooden frame"),
    ("egg", "cracked", "from the farm"), ("bottle", "broke", "full of juice"),
)
_W_FRAGILE_CAUSES = (
    "tripped over a toy", "slipped on the wet floor", "was walking too fast",
    "turned around too quickly", "bumped into the table", "was not looking",
    "heard a loud noise and jumped", "tried to carry too many things",
)
_W_FRAGILE_FIXES = (
    ("glued the pieces back together", "The {obj} was not perfect, but it worked again."),
    ("went to the market and bought a new {obj}", "The new {obj} was even nicer than the old one."),
    ("swept up the pieces with a broom", "Nobody stepped on the sharp pieces."),
    ("found an old {obj} in the cupboard", "It was a little dusty, but it was fine."),
)
_W_HOME_PLACES = ("kitchen", "living room", "dining room", "hallway", "bedroom", "playroom")
# Outdoor places: (noun, preposition, things to see, things to do).
_W_PLACES = (
    ("park", "at", ("ducks on the pond", "tall trees", "children on the swings", "a big fountain"),
     ("played on the swings", "fed the ducks", "ran on the grass", "climbed a small tree")),
    ("beach", "at", ("big waves", "white shells", "a red boat", "seagulls in the sky"),
     ("built a sand castle", "collected shells", "swam in the sea", "looked for crabs")),
    ("forest", "in", ("a family of deer", "tall pine trees", "a quiet stream", "red mushrooms"),
     ("walked on a narrow path", "looked for pine cones", "listened to the birds",
      "followed a little stream")),
    ("farm", "at", ("cows in the field", "a noisy rooster", "baby goats", "a big red barn"),
     ("fed the chickens", "rode on a tractor", "picked apples", "brushed a pony")),
    ("zoo", "at", ("a tall giraffe", "a sleepy lion", "two playful monkeys", "a gray elephant"),
     ("watched the penguins swim", "fed the goats", "laughed at the monkeys",
      "looked at the colorful birds")),
    ("lake", "at", ("green frogs", "a white swan", "fishing boats", "dragonflies"),
     ("threw stones into the water", "went fishing", "rowed a little boat",
      "dipped their feet in the water")),
    ("library", "at", ("shelves full of books", "a map of the world", "a sleeping cat",
                       "a big globe"),
     ("read a book about dinosaurs", "found a book about stars", "listened to a story",
      "drew pictures of dragons")),
    ("museum", "at", ("old bones of a dinosaur", "shiny stones", "a model of a ship",
                      "paintings of the sea"),
     ("looked at the old coins", "learned about the moon", "drew a picture of a dinosaur",
      "listened to a guide")),
    ("market", "at", ("piles of oranges", "fresh bread", "colorful flowers", "a man selling hats"),
     ("bought some fruit", "tasted fresh cheese", "looked at the flowers",
      "bought a loaf of bread")),
    ("playground", "at", ("a long slide", "a sandbox", "a tall climbing frame", "a seesaw"),
     ("went down the slide", "played in the sandbox", "played on the seesaw",
      "climbed to the top of the frame")),
    ("river", "by", ("a wooden bridge", "fast water", "a family of ducks", "smooth stones"),
     ("crossed the wooden bridge", "skipped stones on the water", "looked for fish",
      "had a picnic on the grass")),
    ("hill", "on", ("the whole town", "white clouds", "a windmill", "a flock of sheep"),
     ("rolled down the grass", "flew a kite", "had a picnic", "watched the clouds")),
)
_W_VEHICLES = ("by bus", "by train", "by car", "by bike", "on foot", "by boat")
# Fruit and snacks: (singular, plural).
_W_FOOD_ITEMS = (
    ("apple", "apples"), ("orange", "oranges"), ("banana", "bananas"), ("cookie", "cookies"),
    ("cherry", "cherries"), ("strawberry", "strawberries"), ("pear", "pears"), ("plum", "plums"),
    ("muffin", "muffins"), ("carrot", "carrots"), ("peach", "peaches"), ("cupcake", "cupcakes"),
    ("grape", "grapes"), ("lemon", "lemons"), ("sandwich", "sandwiches"), ("candy", "candies"),
    ("apricot", "apricots"), ("blueberry", "blueberries"), ("pretzel", "pretzels"),
    ("dumpling", "dumplings"), ("tangerine", "tangerines"), ("coconut", "coconuts"),
    ("kiwi", "kiwis"), ("biscuit", "biscuits"), ("doughnut", "doughnuts"), ("waffle", "waffles"),
    ("raspberry", "raspberries"), ("gooseberry", "gooseberries"), ("radish", "radishes"),
    ("walnut", "walnuts"), ("pancake", "pancakes"), ("cucumber", "cucumbers"),
)
# Needs and how they are met: (state, helper's action, result).
_W_NEEDS = (
    ("hungry", "made {o} a sandwich", "ate the sandwich", "was not hungry anymore"),
    ("hungry", "gave {o} a bowl of soup", "ate all the soup", "felt full and happy"),
    ("thirsty", "gave {o} a glass of water", "drank the water", "was not thirsty anymore"),
    ("thirsty", "poured {o} some juice", "drank the juice", "felt much better"),
    ("cold", "gave {o} a warm blanket", "wrapped the blanket around {r}", "was warm again"),
    ("cold", "made {o} a cup of hot tea", "drank the tea slowly", "was not cold anymore"),
    ("tired", "read {o} a short story", "closed {p} eyes", "fell asleep"),
    ("sad", "told {o} a funny joke", "laughed and laughed", "was not sad anymore"),
    ("bored", "showed {o} a new game", "played the game all afternoon", "was not bored anymore"),
    ("scared of the dark", "turned on a small lamp", "looked around the room",
     "was not scared anymore"),
)
_W_PETS = (
    ("dog", ("Buddy", "Rex", "Biscuit", "Coco", "Pepper", "Rocky"), "bark", "wagged its tail"),
    ("cat", ("Whiskers", "Tiger", "Mittens", "Shadow", "Smokey", "Ginger"), "meow", "purred"),
    ("rabbit", ("Snowball", "Clover", "Hopper", "Fluffy", "Thumper", "Cotton"), "squeak",
     "twitched its nose"),
    ("puppy", ("Lucky", "Patch", "Bingo", "Scout", "Teddy", "Bella"), "yip", "wagged its tail"),
)
_W_PET_HIDES = (
    "under the bed", "behind the sofa", "in the laundry basket", "under a bush in the garden",
    "inside a big box", "behind the shed", "under the kitchen table", "in a pile of leaves",
)
_W_PET_TRICKS = (
    "chase its tail", "sleep in the sun", "play with a ball", "dig in the garden",
    "jump over a stick", "hide in boxes",
)
_W_LOST_THINGS = (
    "teddy bear", "blue hat", "toy car", "favorite book", "red scarf", "lucky coin",
    "yellow crayon", "little robot", "green mitten", "toy dinosaur", "silver key", "drawing",
    "harmonica", "compass", "magnifying glass", "bracelet", "necklace", "umbrella", "sketchbook",
    "flashlight", "whistle", "postcard", "wristwatch", "hairbrush", "skipping rope", "paint set",
)
_W_LOST_PLACES = (
    "under the bed", "in the toy box", "behind the sofa", "in the closet", "on the shelf",
    "in the backpack", "under the pillow", "in the car", "next to the door", "under the table",
)
_W_SEEDS = (
    ("sunflower", "a tall yellow sunflower"), ("tomato", "a plant with red tomatoes"),
    ("bean", "a long green bean plant"), ("pumpkin", "a big orange pumpkin"),
    ("rose", "a pink rose"), ("pea", "a plant full of green peas"),
    ("tulip", "a red tulip"), ("strawberry", "a plant with sweet strawberries"),
)
# Things to bake: (short name, full name, pronoun, verb "to be", the remade one).
_W_BAKES = (
    ("cake", "a chocolate cake", "it", "was", "second cake"),
    ("pie", "an apple pie", "it", "was", "second pie"),
    ("bread", "a loaf of bread", "it", "was", "second loaf"),
    ("cookies", "a tray of cookies", "they", "were", "second tray of cookies"),
    ("muffins", "a batch of blueberry muffins", "they", "were", "second batch of muffins"),
    ("pancakes", "a stack of pancakes", "they", "were", "second stack of pancakes"),
)
_W_OCCASIONS = (
    "birthday", "first day of school", "party", "visit", "picnic", "holiday",
)
_W_TOYS = (
    "red ball", "toy train", "kite", "puzzle", "jump rope", "set of blocks", "toy boat",
    "board game", "box of crayons", "doll house", "yo-yo", "toy drum",
)
_W_FEELINGS_GOOD = ("happy", "glad", "proud", "excited", "cheerful", "delighted")
_W_FEELINGS_BAD = ("sad", "upset", "unhappy", "worried", "grumpy", "disappointed")
_W_SAID = ("said", "asked", "shouted", "whispered", "called", "replied", "answered")
_W_ENDINGS = (
    "It was a good day.", "It was a day to remember.", "The end.", "What a day it was!",
    "Everyone went home happy.", "That night, everyone slept well.",
)

# Jobs: (job, what they do, where they work, a task they show, a tool).
_W_JOBS = (
    ("baker", "bakers", "bake bread before the sun comes up", "bakery", "knead the dough",
     "rolling pin"),
    ("doctor", "doctors", "help people who are sick", "hospital", "listen to a heartbeat",
     "stethoscope"),
    ("firefighter", "firefighters", "put out fires and rescue people", "fire station",
     "roll out the long hose", "helmet"),
    ("farmer", "farmers", "grow vegetables and take care of animals", "farm", "milk a cow",
     "pitchfork"),
    ("pilot", "pilots", "fly airplanes across the sky", "airport", "check the engines", "map"),
    ("carpenter", "carpenters", "build things out of wood", "workshop", "sand a wooden board",
     "hammer"),
    ("veterinarian", "veterinarians", "take care of sick animals", "animal clinic",
     "bandage a puppy's paw", "thermometer"),
    ("librarian", "librarians", "look after books and help readers", "library",
     "sort the books on the shelves", "stamp"),
    ("gardener", "gardeners", "plant flowers and trim hedges", "botanical garden",
     "prune a rose bush", "watering can"),
    ("astronaut", "astronauts", "travel into space in a rocket", "space center",
     "put on a heavy space suit", "telescope"),
    ("fisherman", "fishermen", "catch fish far out at sea", "harbor", "mend a fishing net",
     "fishing rod"),
    ("painter", "painters", "paint pictures of people and places", "studio",
     "mix colors on a palette", "paintbrush"),
    ("mechanic", "mechanics", "repair cars and trucks", "garage", "change a flat tire", "wrench"),
    ("chef", "chefs", "cook delicious meals", "restaurant", "chop vegetables very fast",
     "frying pan"),
    ("nurse", "nurses", "care for patients in the hospital", "hospital", "put on a bandage",
     "thermometer"),
    ("scientist", "scientists", "do experiments to learn how things work", "laboratory",
     "look through a microscope", "microscope"),
    ("musician", "musicians", "play songs for an audience", "concert hall", "tune a violin",
     "violin"),
    ("builder", "builders", "build houses and bridges", "building site", "lay a row of bricks",
     "trowel"),
    ("teacher", "teachers", "help children learn", "school", "write on the blackboard", "chalk"),
    ("zookeeper", "zookeepers", "feed and clean the animals", "zoo", "feed the hungry penguins",
     "bucket"),
    ("postman", "postmen", "deliver letters and parcels", "post office",
     "sort the letters into bags", "satchel"),
    ("dentist", "dentists", "keep teeth healthy and clean", "clinic", "count a patient's teeth",
     "mirror"),
    ("photographer", "photographers", "take pictures of special moments", "studio",
     "focus the camera", "camera"),
    ("tailor", "tailors", "sew clothes that fit just right", "tailor shop", "measure a jacket",
     "needle"),
    ("plumber", "plumbers", "fix pipes and leaking taps", "workshop", "tighten a pipe", "spanner"),
    ("potter", "potters", "shape bowls and jugs out of clay", "pottery", "turn the potter's wheel",
     "sponge"),
    ("beekeeper", "beekeepers", "look after bees and collect honey", "apiary",
     "lift a frame full of honeycomb", "smoker"),
    ("architect", "architects", "draw plans for new buildings", "office",
     "draw a house with a ruler", "pencil"),
    ("lifeguard", "lifeguards", "keep swimmers safe", "swimming pool", "throw a rescue ring",
     "whistle"),
    ("blacksmith", "blacksmiths", "shape hot iron into tools", "forge", "bend a horseshoe",
     "anvil"),
    ("shepherd", "shepherds", "take care of sheep on the hills", "meadow", "call the sheep home",
     "crook"),
    ("sailor", "sailors", "sail ships across the ocean", "harbor", "tie a strong knot", "compass"),
)
# School lessons: (topic, facts, a question a child asks, the answer).
_W_LESSONS = (
    ("the sun and the planets",
     ("The sun is a star.", "The earth goes around the sun once every year.",
      "Mars is called the red planet.", "Jupiter is the biggest planet.",
      "The moon goes around the earth."),
     "Why is it dark at night?", "At night, our side of the earth faces away from the sun."),
    ("bees and flowers",
     ("Bees fly from flower to flower.", "Bees make honey from nectar.",
      "Flowers need bees to make seeds.", "A beehive can hold thousands of bees."),
     "Do bees sleep?", "Yes, bees rest at night inside their hive."),
    ("the weather",
     ("Clouds are made of tiny drops of water.", "When the drops get heavy, they fall as rain.",
      "Snow falls when the air is very cold.", "Thunder is the sound that lightning makes."),
     "Where does the rain go?", "It flows into rivers, and the rivers flow into the sea."),
    ("the ocean",
     ("The ocean is full of salty water.", "Whales are the biggest animals in the ocean.",
      "Octopuses have eight arms.", "Coral reefs are home to many colorful fish.",
      "Dolphins breathe air, just like us."),
     "Why is the sea salty?", "Rivers carry tiny bits of salt from rocks into the sea."),
    ("dinosaurs",
     ("Dinosaurs lived a very long time ago.", "Some dinosaurs ate plants, and some ate meat.",
      "We learn about dinosaurs from their fossils.", "Birds are cousins of the dinosaurs."),
     "Can I see a real dinosaur?", "No, but you can see their bones in a museum."),
    ("the human body",
     ("The heart pumps blood around the body.", "We have two hundred and six bones.",
      "Our lungs breathe in fresh air.", "Muscles help us move and jump."),
     "Why do we need to sleep?", "Sleep helps the body rest and grow."),
    ("plants",
     ("Plants need water, air and sunlight to grow.", "Roots drink water from the soil.",
      "Leaves use sunlight to make food.", "Trees can live for hundreds of years."),
     "Why are leaves green?", "Leaves are green because of something called chlorophyll."),
    ("insects",
     ("Insects have six legs.", "A caterpillar turns into a butterfly.",
      "Ants can carry things much heavier than themselves.",
      "Ladybugs eat tiny bugs that hurt plants."),
     "Is a spider an insect?", "No, a spider has eight legs, so it is not an insect."),
    ("water",
     ("Water freezes into ice when it is very cold.", "Hot water turns into steam.",
      "Ice melts when it gets warm.", "All living things need water."),
     "Why does ice float?", "Ice is a little lighter than the water around it."),
    ("birds",
     ("Birds have feathers and wings.", "Many birds fly south in the winter.",
      "Penguins are birds that cannot fly.", "Owls hunt at night."),
     "How do birds build nests?", "They carry twigs and grass in their beaks, one by one."),
    ("volcanoes",
     ("A volcano is a mountain with hot melted rock inside.",
      "The melted rock is called lava.", "When a volcano erupts, smoke and ash fly into the air."),
     "Are there volcanoes under the sea?", "Yes, there are many volcanoes under the ocean."),
    ("magnets",
     ("A magnet pulls things made of iron.", "Every magnet has a north pole and a south pole.",
      "Two north poles push each other away."),
     "Can a magnet pick up wood?", "No, magnets only pull some metals."),
    ("the moon",
     ("The moon has no air and no water.", "The moon looks different every night.",
      "Astronauts walked on the moon long ago.",
      "The moon shines because sunlight bounces off it."),
     "Is the moon made of cheese?", "No, the moon is made of rock and dust."),
    ("frogs",
     ("Frogs start life as tadpoles in a pond.", "Tadpoles grow legs and lose their tails.",
      "Frogs catch insects with their long sticky tongues.",
      "Frogs can breathe through their skin."),
     "Why do frogs croak?", "Male frogs croak to call to other frogs."),
    ("rainbows",
     ("A rainbow appears when sunlight shines through raindrops.",
      "A rainbow has seven colors.", "Red is always on the outside of a rainbow."),
     "Can you touch a rainbow?", "No, a rainbow is only light, so you cannot touch it."),
    ("elephants",
     ("Elephants are the biggest animals that live on land.",
      "An elephant uses its trunk to drink and to smell.",
      "Elephants live in families called herds.", "Elephants flap their big ears to keep cool."),
     "Do elephants forget things?", "Elephants have very good memories."),
    ("seeds",
     ("Every apple has seeds inside.", "The wind carries some seeds far away.",
      "Squirrels bury acorns, and some grow into oak trees.", "A seed needs water to sprout."),
     "How does a seed know which way is up?",
     "Roots grow down and shoots grow up toward the light."),
    ("teeth",
     ("Children have twenty baby teeth.", "Brushing twice a day keeps teeth healthy.",
      "Sugar can make holes in teeth.", "Grown-ups have thirty-two teeth."),
     "Why do baby teeth fall out?", "They fall out to make room for bigger, stronger teeth."),
    ("spiders",
     ("Spiders spin webs out of silk.", "A spider has eight legs.",
      "Most spiders catch flies in their webs.", "Some spiders can jump very far."),
     "Do spiders get stuck in their own webs?", "No, spiders know which threads are not sticky."),
    ("the desert",
     ("A desert gets very little rain.", "Camels can walk for days without drinking.",
      "Cactuses store water in their thick stems.", "Deserts can be cold at night."),
     "Why do camels have humps?", "The humps store fat, which gives camels energy."),
    ("bread",
     ("Bread is made from flour, water, salt and yeast.", "Yeast makes the dough rise.",
      "Flour is made by grinding wheat.", "Bread gets a brown crust in the hot oven."),
     "Why does bread have holes?", "The yeast makes little bubbles of gas in the dough."),
    ("recycling",
     ("Old paper can be made into new paper.", "Glass bottles can be melted and used again.",
      "Plastic should go in the recycling bin.", "Recycling saves trees and energy."),
     "What happens to old cans?", "They are melted down and made into new cans."),
)
# Seasons: (season, what the weather does, clothes, activities, a closing image).
_W_SEASONS = (
    ("winter", ("snow covered the ground", "the pond froze", "icicles hung from the roof"),
     "a warm coat, thick boots and woolly gloves",
     ("built a snowman with a carrot nose", "went sledding down the hill",
      "threw snowballs", "went ice skating on the frozen pond"),
     "drank hot chocolate by the fireplace"),
    ("spring", ("the flowers began to bloom", "the birds were singing",
                "little green leaves appeared on the trees"),
     "a light jacket and rain boots",
     ("jumped in puddles", "looked for baby birds in the nests", "planted tulips",
      "chased butterflies"),
     "picked a bunch of daffodils for the kitchen table"),
    ("summer", ("the sun was hot", "the days were long", "the grass was dry and warm"),
     "shorts, a t-shirt and a sun hat",
     ("swam in the lake", "ate cold watermelon", "ran through the sprinkler", "went camping"),
     "watched fireflies glowing in the dark"),
    ("autumn", ("the leaves turned red and orange", "the wind was cool", "apples were ripe"),
     "a sweater and a scarf",
     ("jumped in piles of leaves", "picked apples in the orchard", "carved a pumpkin",
      "collected acorns and chestnuts"),
     "baked an apple crumble with the apples they picked"),
)
# Shops: (shop, items with prices in coins).
_W_SHOPS = (
    ("bakery", (("croissant", 2), ("loaf of bread", 3), ("cinnamon roll", 2),
                ("birthday cake", 9))),
    ("toy shop", (("yo-yo", 3), ("kite", 6), ("puzzle", 5), ("toy robot", 8), ("marbles", 2))),
    ("bookshop", (("comic book", 4), ("book about pirates", 6), ("notebook", 2), ("atlas", 9))),
    ("flower shop", (("sunflower", 2), ("bunch of roses", 7), ("small cactus", 4), ("lily", 3))),
    ("fruit stand", (("watermelon", 5), ("pineapple", 4), ("bag of cherries", 3), ("mango", 2))),
    ("pet shop", (("bag of fish food", 3), ("rubber bone", 2), ("bird whistle", 4),
                  ("cat collar", 5))),
    ("ice cream stand", (("vanilla cone", 2), ("chocolate sundae", 4),
                         ("strawberry milkshake", 3))),
)
# Instruments and sports: (thing, what practice sounds or looks like at first, the big event).
_W_SKILLS = (
    ("play the violin", "it squeaked like a mouse", "the school concert"),
    ("play the piano", "the notes were all mixed up", "the spring concert"),
    ("play the trumpet", "it sounded like an angry goose", "the town parade"),
    ("play the guitar", "the strings buzzed and hurt her fingers", "the family party"),
    ("play the drums", "the beat was too fast and too loud", "the school concert"),
    ("play the flute", "only air came out", "the music festival"),
    ("ride a bike", "the bike wobbled and fell over", "the bike race in the park"),
    ("swim", "the water went up his nose", "the swimming race"),
    ("juggle", "the balls fell on the floor", "the talent show"),
    ("skate", "the skates slipped and slid", "the winter show"),
    ("dance", "the steps were hard to remember", "the dance show"),
    ("play chess", "the pieces were confusing", "the chess tournament"),
    ("draw horses", "the horses looked like potatoes", "the art contest"),
    ("bake bread", "the bread came out flat", "the village fair"),
)

# Wild animals: (animal, plural, where it was seen, what it was doing, what it eats, how it left).
_W_WILD = (
    ("squirrel", "squirrels", "in an oak tree", "burying an acorn", "nuts and seeds",
     "ran up the tree"),
    ("hedgehog", "hedgehogs", "under a hedge", "sniffing the ground", "beetles and worms",
     "rolled into a ball"),
    ("fox", "foxes", "at the edge of the woods", "watching the chickens", "mice and berries",
     "trotted back into the woods"),
    ("owl", "owls", "on a high branch", "turning its head", "mice", "flew away without a sound"),
    ("deer", "deer", "in a misty meadow", "nibbling the grass", "grass and leaves",
     "leaped over a log"),
    ("tortoise", "tortoises", "in the vegetable patch", "chewing a lettuce leaf",
     "leaves and flowers", "walked away very slowly"),
    ("woodpecker", "woodpeckers", "on a tree trunk", "tapping the bark",
     "insects under the bark", "flew off"),
    ("badger", "badgers", "near a hole in the hill", "digging with its claws", "worms and roots",
     "went back into its burrow"),
    ("heron", "herons", "in the shallow water", "standing on one leg", "fish and frogs",
     "spread its wings and flew away"),
    ("raccoon", "raccoons", "by the trash cans", "washing its paws", "almost anything",
     "climbed over the wall"),
    ("beaver", "beavers", "by the stream", "chewing a branch", "bark and twigs", "swam to its dam"),
    ("butterfly", "butterflies", "on a purple flower", "drinking nectar", "nectar",
     "fluttered away"),
    ("snail", "snails", "on a wet leaf", "leaving a shiny trail", "leaves", "hid inside its shell"),
    ("robin", "robins", "on the fence", "singing a song", "worms and berries",
     "hopped into the bushes"),
)


@dataclass(frozen=True)
class _Person:
    """One character of a story: a name and the pronouns that agree with it."""

    name: str
    subj: str
    obj: str
    poss: str
    refl: str

    @property
    def Subj(self) -> str:  # noqa: N802 - capitalised form for the start of a sentence
        """Capitalised subject pronoun."""
        return self.subj.capitalize()

    @property
    def Poss(self) -> str:  # noqa: N802
        """Capitalised possessive pronoun."""
        return self.poss.capitalize()


class _Dice:
    """Random choices built only on ``Random.random()``, whose sequence Python keeps stable."""

    def __init__(self, seed: int) -> None:
        self._rng = Random(seed)

    def uniform(self) -> float:
        return self._rng.random()

    def pick(self, seq: Sequence[Any]) -> Any:
        return seq[int(self._rng.random() * len(seq))]

    def chance(self, p: float) -> bool:
        return self._rng.random() < p

    def between(self, lo: int, hi: int) -> int:
        return lo + int(self._rng.random() * (hi - lo + 1))

    def distinct(self, seq: Sequence[Any], k: int) -> list[Any]:
        pool = list(seq)
        return [pool.pop(int(self._rng.random() * len(pool))) for _ in range(k)]


def _person(name: str, gender: str) -> _Person:
    return _Person(name, *_W_PRONOUNS[gender])


def _kids(d: _Dice, k: int) -> list[_Person]:
    """Pick ``k`` children with distinct names."""
    people: list[_Person] = []
    names: set[str] = set()
    while len(people) < k:
        if d.chance(0.5):
            name, gender = d.pick(_W_GIRLS), "she"
        else:
            name, gender = d.pick(_W_BOYS), "he"
        if name not in names:
            names.add(name)
            people.append(_person(name, gender))
    return people


def _adult(d: _Dice, pool: Sequence[tuple[str, str]] = _W_ADULTS) -> _Person:
    name, gender = d.pick(pool)
    return _person(name, gender)


def _opening(d: _Dice) -> str:
    if d.chance(0.2):
        return f"{d.pick(_W_DAY_OPENINGS)} {d.pick(_W_ORDINAL_DAYS)}"
    return d.pick(_W_OPENINGS)


def _number(n: int) -> str:
    return _W_NUMBERS[n]


def _a(word: str) -> str:
    """The indefinite article for ``word``."""
    return "an" if word[0] in "aeiou" else "a"


def _say(d: _Dice, who: _Person, line: str) -> str:
    """A line of dialogue in one of three shapes; ``line`` ends with punctuation."""
    verb = "asked" if line.endswith("?") else d.pick(("said", "said", "shouted", "whispered",
                                                      "called", "replied"))
    shape = d.uniform()
    if shape < 0.5:
        return f'{who.name} {verb}, "{line}"'
    if shape < 0.9:
        inner = line[:-1] + ("," if line.endswith(".") else line[-1])
        return f'"{inner}" {verb} {who.name}.'
    return f'"{line}"'


def _plot_accident(d: _Dice) -> list[str]:
    """Someone drops a fragile thing; it breaks; feelings; a helper; a fix."""
    a, friend = _kids(d, 2)
    helper = _adult(d) if d.chance(0.6) else friend
    obj, breaks, held = d.pick(_W_FRAGILE)
    colour = d.pick(_W_COLOURS)
    room = d.pick(_W_HOME_PLACES)
    cause = d.pick(_W_FRAGILE_CAUSES)
    s = [f"{_opening(d)}, {a.name} was in the {room} with {helper.name}."]
    s.append(d.pick((
        f"{a.Subj} was carrying {_a(colour)} {colour} {obj} {held}.",
        f"{a.name} picked up {_a(colour)} {colour} {obj} {held}.",
        f"{a.Subj} wanted to show {helper.name} {_a(colour)} {colour} {obj} {held}.",
    )))
    s.append(d.pick((
        f"{a.Subj} {cause}, so {a.subj} dropped the {obj}.",
        f"Then {a.subj} {cause} and dropped the {obj}.",
        f"Because {a.subj} {cause}, the {obj} fell out of {a.poss} hands.",
    )))
    s.append(d.pick((
        f"The {obj} hit the floor and {breaks}.",
        f"The {obj} {breaks} into many pieces.",
        f"Crash! The {obj} {breaks}.",
    )))
    feeling = d.pick(_W_FEELINGS_BAD)
    s.append(d.pick((
        f"{a.name} was {feeling}.",
        f"{a.name} felt {feeling} and started to cry.",
        f"{a.Subj} looked at the pieces and felt {feeling}.",
    )))
    s.append(_say(d, helper, d.pick((
        "Do not worry, accidents happen.", "Are you hurt?", "It is only a little accident.",
        "Let me help you.", "Do not touch the sharp pieces.",
    ))))
    fix, result = d.pick(_W_FRAGILE_FIXES)
    fix, result = fix.format(obj=obj), result.format(obj=obj)
    s.append(d.pick((
        f"Together they {fix}.",
        f"Then {a.name} and {helper.name} {fix}.",
        f"After that, {helper.name} {fix}.",
    )))
    s.append(result)
    s.append(d.pick((
        f"{a.name} felt better.",
        f"{a.name} smiled again.",
        f"From that day on, {a.name} was more careful.",
        f"{a.name} learned to walk slowly when {a.subj} carried something.",
        f"{a.name} said thank you to {helper.name}.",
    )))
    return s


def _plot_lost(d: _Dice) -> list[str]:
    """A child loses a thing, looks in two wrong places, and a helper's hint finds it."""
    a, friend = _kids(d, 2)
    helper = _adult(d) if d.chance(0.5) else friend
    thing = d.pick(_W_LOST_THINGS)
    wrong1, wrong2, right = d.distinct(_W_LOST_PLACES, 3)
    s = [d.pick((
        f"{a.name} had a {thing} that {a.subj} loved very much.",
        f"{a.name} loved {a.poss} {thing}.",
        f"{_opening(d)}, {a.name} could not find {a.poss} {thing}.",
    ))]
    if "could not find" not in s[0]:
        s.append(f"{_opening(d)}, {a.subj} could not find it.")
    s.append(f"{a.Subj} looked {wrong1}, but it was not there.")
    s.append(d.pick((
        f"Then {a.subj} looked {wrong2}, but it was not there either.",
        f"{a.Subj} looked {wrong2} too, but {a.subj} did not find it.",
    )))
    s.append(d.pick((
        f"{a.name} was {d.pick(_W_FEELINGS_BAD)}.",
        f"{a.name} sat down and felt {d.pick(_W_FEELINGS_BAD)}.",
    )))
    s.append(_say(d, helper, f"Did you look {right}?"))
    s.append(d.pick((
        f"{a.name} looked {right}, and there it was!",
        f"{a.name} ran to look {right}, and the {thing} was there.",
        f"They looked {right} together and found the {thing}.",
    )))
    good = d.pick(_W_FEELINGS_GOOD)
    s.append(d.pick((
        f"{a.name} was so {good} that {a.subj} hugged {helper.name}.",
        f"{a.name} felt {good} and said thank you to {helper.name}.",
        f"{a.name} was {good} again.",
    )))
    if d.chance(0.5):
        s.append(d.pick((
            f"After that, {a.subj} always put the {thing} {right}.",
            f"From then on, {a.subj} kept the {thing} in a safe place.",
        )))
    return s


def _plot_weather(d: _Dice) -> list[str]:
    """Rain or wind changes a trip outside; cause and effect on who gets wet or what flies."""
    a, b = _kids(d, 2)
    place, prep, sights, acts = d.pick(_W_PLACES[:6] + _W_PLACES[9:])
    act = d.pick(acts)
    s = [d.pick((
        f"{_opening(d)}, {a.name} and {b.name} went to the {place}.",
        f"{_opening(d)}, {a.name} and {a.poss} friend {b.name} went to the {place} to play.",
    ))]
    s.append(f"They {act}.")
    if d.chance(0.5):
        s.append(d.pick((
            "Suddenly, dark clouds covered the sky and it started to rain.",
            "Then the sky turned gray, and big drops of rain began to fall.",
        )))
        if d.chance(0.5):
            s.append(f"{a.name} had an umbrella, so {a.subj} stayed dry.")
            s.append(f"{b.name} did not have an umbrella, so {b.subj} started to get wet.")
            s.append(d.pick((
                f"{a.name} shared {a.poss} umbrella with {b.name}.",
                f"{a.name} held the umbrella over {b.name} too.",
            )))
            s.append(f"Now they were both dry, and {b.name} was {d.pick(_W_FEELINGS_GOOD)}.")
        else:
            s.append(f"They did not have an umbrella, so they got wet.")
            s.append("They ran home as fast as they could.")
            grown = _adult(d)
            s.append(d.pick((
                f"They were cold, so {grown.name} made them hot cocoa.",
                f"They were cold, so {grown.name} gave them dry clothes and warm socks.",
            )))
            s.append("Soon they were warm again.")
        s.append(d.pick((
            "When the rain stopped, they saw a rainbow.",
            "Later the sun came out again.",
            "They watched the rain from the window.",
        )))
    else:
        s.append("Suddenly, a strong wind began to blow.")
        hat = d.pick(("hat", "cap", "scarf", "paper bag", "drawing"))
        s.append(d.pick((
            f"The wind blew {b.name}'s {hat} away.",
            f"The wind took {b.name}'s {hat} and carried it into the air.",
        )))
        if d.chance(0.6):
            s.append(f"{a.name} ran after the {hat} and caught it.")
            s.append(_say(d, b, "Thank you!"))
            s.append(f"{b.name} was {d.pick(_W_FEELINGS_GOOD)} to have {b.poss} {hat} back.")
        else:
            s.append(f"The {hat} flew over a tall fence, and they could not get it.")
            s.append(f"{b.name} was {d.pick(_W_FEELINGS_BAD)}.")
            s.append(f"{a.name} gave {b.name} {a.poss} own {hat}, and {b.name} smiled.")
    return s


def _plot_share(d: _Dice) -> list[str]:
    """One child shares food with another, and the counts stay consistent."""
    a, b = _kids(d, 2)
    single, plural = d.pick(_W_FOOD_ITEMS)
    n = d.between(2, 12)
    k = d.between(1, n - 1)
    left = n - k

    def count(m: int) -> str:
        return f"{_number(m)} {single if m == 1 else plural}"

    place, prep, _, _ = d.pick(_W_PLACES)
    s = [d.pick((
        f"{_opening(d)}, {a.name} had {count(n)}.",
        f"{_opening(d)}, {a.name} went to the {place} with {count(n)} in a bag.",
        f"{a.name} had {count(n)} in {a.poss} basket.",
    ))]
    s.append(d.pick((
        f"{b.name} had no {plural}, and {b.subj} was hungry.",
        f"{a.Subj} met {b.name}, who looked hungry.",
        f"{a.Subj} saw that {b.name} did not have any {plural}.",
    )))
    s.append(d.pick((
        f"{a.name} gave {count(k)} to {b.name}.",
        f"{a.name} decided to share, so {a.subj} gave {b.name} {count(k)}.",
    )))
    s.append(d.pick((
        f"Now {a.name} had {count(left)}, and {b.name} had {count(k)}.",
        f"After that, {a.name} had {count(left)} left.",
    )))
    s.append(_say(d, b, d.pick(("Thank you!", "Thank you, you are very kind.",
                                "That is so nice of you."))))
    s.append(d.pick((
        f"They ate the {plural} together.",
        f"They sat down and ate their {plural}.",
        f"{b.name} ate {b.poss} {single if k == 1 else plural} and was not hungry anymore.",
    )))
    s.append(d.pick((
        f"Sharing made {a.name} feel {d.pick(_W_FEELINGS_GOOD)}.",
        f"{a.name} and {b.name} became good friends.",
        f"{a.name} was {d.pick(_W_FEELINGS_GOOD)} that {a.subj} had shared.",
    )))
    return s


def _plot_need(d: _Dice) -> list[str]:
    """Someone is hungry, cold or tired; a helper does the matching thing; the need goes away."""
    needer, helper = (_kids(d, 2) if d.chance(0.5) else (_kids(d, 1)[0], _adult(d)))
    state, help_act, use, result = d.pick(_W_NEEDS)
    help_act = help_act.format(o=needer.obj)
    use = use.format(r=needer.refl, p=needer.poss)
    room = d.pick(_W_HOME_PLACES)
    s = [d.pick((
        f"{_opening(d)}, {needer.name} came into the {room}.",
        f"{_opening(d)}, {needer.name} and {helper.name} were at home.",
        f"{needer.name} sat in the {room} with {helper.name}.",
    ))]
    s.append(d.pick((
        f"{needer.name} was {state}.",
        f"{needer.name} felt very {state}.",
    )))
    s.append(_say(d, needer, f"I am {state}."))
    s.append(d.pick((
        f"{helper.name} {help_act}.",
        f"So {helper.name} {help_act}.",
        f"{helper.name} wanted to help, so {helper.subj} {help_act}.",
    )))
    s.append(f"{needer.name} {use}.")
    s.append(d.pick((
        f"Soon {needer.subj} {result}.",
        f"After a while, {needer.name} {result}.",
        f"Then {needer.subj} {result}.",
    )))
    if state != "tired" and d.chance(0.6):  # nobody says thank you in their sleep
        s.append(d.pick((
            f"{needer.name} said thank you to {helper.name}.",
            f"{needer.name} gave {helper.name} a big hug.",
            f"{helper.name} was {d.pick(_W_FEELINGS_GOOD)} to help.",
        )))
    return s


def _plot_pet(d: _Dice) -> list[str]:
    """A pet goes missing, the child looks for it, and finds it where pets hide."""
    a = _kids(d, 1)[0]
    kind, names, noise, happy_sign = d.pick(_W_PETS)
    pet = d.pick(names)
    colour = d.pick(("brown", "white", "black", "gray", "golden", "spotted"))
    trick = d.pick(_W_PET_TRICKS)
    hide = d.pick(_W_PET_HIDES)
    s = [d.pick((
        f"{a.name} had {_a(colour)} {colour} {kind} named {pet}.",
        f"{a.name} had a {d.pick(_W_SIZES)} {kind}, and its name was {pet}.",
    ))]
    s.append(f"{pet} liked to {trick}.")
    s.append(d.pick((
        f"{_opening(d)}, {a.name} could not find {pet}.",
        f"{_opening(d)}, {pet} was gone.",
    )))
    s.append(f"{a.name} was {d.pick(('worried', 'scared', 'upset'))}.")
    s.append(f'{a.Subj} called, "{pet}! {pet}! Where are you?"')
    s.append(d.pick((
        f"Then {a.subj} heard a little {noise}.",
        f"After a while, {a.subj} heard a soft {noise}.",
    )))
    s.append(d.pick((
        f"{pet} was {hide}.",
        f"{a.name} looked {hide}, and there was {pet}!",
    )))
    s.append(f"{pet} {happy_sign}.")
    s.append(d.pick((
        f"{a.name} laughed and gave {pet} a treat.",
        f"{a.name} hugged {pet} and was {d.pick(_W_FEELINGS_GOOD)}.",
        f"{a.name} was so {d.pick(_W_FEELINGS_GOOD)} that {a.subj} danced around the room.",
    )))
    return s


def _plot_trip(d: _Dice) -> list[str]:
    """A child and a grown-up visit a place, see things there, and come home tired."""
    a = _kids(d, 1)[0]
    grown = _adult(d, _W_ADULTS[:8])
    place, prep, sights, acts = d.pick(_W_PLACES)
    sight1, sight2 = d.distinct(sights, 2)
    act = d.pick(acts)
    s = [f"{_opening(d)}, {a.name} and {grown.name} went to the {place} {d.pick(_W_VEHICLES)}."]
    s.append(d.pick((
        f"{prep.capitalize()} the {place}, they saw {sight1} and {sight2}.",
        f"There they saw {sight1}.",
        f"{a.name} looked at {sight1} for a long time.",
    )))
    s.append(d.pick((
        f"{a.name} {act}.",
        f"Then they {act}.",
        f"{a.name} and {grown.name} {act}.",
    )))
    if d.chance(0.5):
        s.append(_say(d, a, d.pick(("This is the best day ever!", "Can we come back tomorrow?",
                                    "Look at that!", "I want to stay here forever."))))
    s.append(d.pick((
        "In the evening, they went home.",
        "When the sun went down, they went back home.",
        "At the end of the day, they went home.",
    )))
    s.append(d.pick((
        f"{a.name} was tired, so {a.subj} went to bed early.",
        f"{a.name} was very tired, so {a.subj} fell asleep quickly.",
        f"{a.name} told {d.pick(('Mom', 'Dad', 'Grandma', 'Grandpa'))} all about the {place}.",
    )))
    if d.chance(0.5):
        s.append(f"That night, {a.subj} dreamed about {sight2}.")
    return s


def _plot_garden(d: _Dice) -> list[str]:
    """A seed grows when it is watered and wilts when it is not."""
    a = _kids(d, 1)[0]
    seed, grown = d.pick(_W_SEEDS)
    days = d.between(3, 12)
    s = [d.pick((
        f"{_opening(d)}, {a.name} planted {_a(seed)} {seed} seed in the garden.",
        f"{a.name} got {_a(seed)} {seed} seed from {d.pick(_W_ADULTS)[0]} and planted it in a pot.",
    ))]
    if d.chance(0.6):
        s.append(d.pick((
            f"Every day, {a.subj} gave it water.",
            f"{a.Subj} watered it every morning and put it in the sun.",
        )))
        s.append(f"After {_number(days)} days, a small green shoot came up.")
        s.append(f"Soon it grew into {grown}.")
        s.append(f"{a.name} was {d.pick(_W_FEELINGS_GOOD)}.")
    else:
        s.append(f"But {a.subj} forgot to water it.")
        s.append("The soil became dry, so the little plant started to droop.")
        s.append(f"{a.name} was {d.pick(_W_FEELINGS_BAD)}.")
        s.append(f"{a.Subj} gave the plant some water and put it in the sun.")
        s.append(f"After {_number(days)} days, the plant was green and strong again.")
        s.append(f"Later it grew into {grown}.")
    if d.chance(0.5):
        s.append(d.pick((
            f"{a.name} showed it to all {a.poss} friends.",
            f"{a.name} learned that plants need water and sunlight.",
        )))
    return s


def _plot_bake(d: _Dice) -> list[str]:
    """Baking for someone: a forgotten oven burns it, or it works and the guest is happy."""
    a, b = _kids(d, 2)
    short, full, pron, be, second = d.pick(_W_BAKES)
    occasion = d.pick(_W_OCCASIONS)
    grown = _adult(d, _W_ADULTS[:8])
    s = [d.pick((
        f"{_opening(d)}, {a.name} wanted to bake {full} for {b.name}'s {occasion}.",
        f"It was {b.name}'s {occasion}, so {a.name} decided to make {full}.",
    ))]
    s.append(d.pick((
        f"{a.Subj} mixed flour, eggs, sugar and milk in a big bowl.",
        f"{grown.name} helped {a.obj} mix flour, butter and sugar.",
    )))
    s.append(f"Then {a.subj} put the {short} in the oven.")
    if d.chance(0.35):
        s.append(d.pick((
            f"{a.name} went to play and forgot about the oven.",
            f"{a.name} started to read a book and forgot about the {short}.",
        )))
        s.append(f"The {short} stayed in the oven too long, so {pron} burned.")
        s.append(f"The kitchen smelled of smoke, and {a.name} was {d.pick(_W_FEELINGS_BAD)}.")
        s.append(_say(d, grown, "Let us try again, and this time we will watch the clock."))
        s.append(f"The {second} was perfect.")
    else:
        s.append(d.pick((
            f"After half an hour, the {short} {be} ready.",
            f"Soon the whole house smelled sweet.",
        )))
    s.append(d.pick((
        f"{b.name} was surprised and {d.pick(_W_FEELINGS_GOOD)}.",
        f"When {b.name} saw the {short}, {b.subj} clapped {b.poss} hands.",
        f"{b.name} ate a big piece and said it was delicious.",
    )))
    if d.chance(0.5):
        s.append(d.pick(_W_ENDINGS))
    return s


def _plot_balloon(d: _Dice) -> list[str]:
    """A balloon or kite is let go or popped; a friend makes it right."""
    a, b = _kids(d, 2)
    colour = d.pick(_W_COLOURS)
    place, prep, _, _ = d.pick(_W_PLACES[:2] + _W_PLACES[9:])
    s = [f"{_opening(d)}, {a.name} got {_a(colour)} {colour} balloon {prep} the {place}."]
    if d.chance(0.5):
        s.append("The wind was strong.")
        s.append(f"{a.name} let go of the string, so the balloon flew up into the sky.")
        s.append(d.pick((
            f"{a.Subj} watched it until it was a tiny dot.",
            "Soon it was higher than the trees.",
        )))
    else:
        s.append(f"{a.name} ran into a bush with sharp thorns.")
        s.append("A thorn poked the balloon, so it popped with a loud bang.")
        s.append(f"{a.name} jumped because the noise was so loud.")
    s.append(f"{a.name} was {d.pick(_W_FEELINGS_BAD)}.")
    s.append(d.pick((
        f"{b.name} saw this and gave {a.obj} {b.poss} own balloon.",
        f"{b.name} bought {a.obj} a new balloon with {b.poss} money.",
        f"{b.name} came with a new balloon and tied its string to {a.name}'s wrist.",
    )))
    s.append(d.pick((
        f"{a.name} smiled and said thank you.",
        f"Now {a.name} was {d.pick(_W_FEELINGS_GOOD)} again.",
        f"{a.name} held the new balloon very tightly.",
    )))
    return s


def _plot_ball(d: _Dice) -> list[str]:
    """A ball is kicked or thrown too hard, with a consequence and an apology."""
    a, b = _kids(d, 2)
    place, prep, _, _ = d.pick((_W_PLACES[0], _W_PLACES[9], _W_PLACES[1]))
    neighbour = _adult(d, _W_ADULTS[8:])
    s = [f"{_opening(d)}, {a.name} and {b.name} were playing with a ball {prep} the {place}."]
    s.append(d.pick((
        f"{a.name} threw the ball to {b.name}.",
        f"{a.name} kicked the ball to {b.name}.",
    )))
    roll = d.uniform()
    if roll < 0.35:
        s.append(f"{b.name} did not catch it, so the ball rolled into a puddle.")
        s.append("The ball was wet and muddy.")
        s.append(f"{b.name} wiped the ball with {b.poss} towel, and it was clean again.")
        s.append("They kept on playing.")
    elif roll < 0.7:
        s.append(f"{a.Subj} kicked it too hard, so the ball flew over the fence.")
        s.append(f"It landed in the garden of {neighbour.name}.")
        s.append(f"{a.name} knocked on the door and asked for the ball.")
        s.append(f"{neighbour.name} smiled and gave it back.")
        s.append(_say(d, neighbour, "Please be careful next time."))
        s.append(f"{a.name} said sorry, and they played more carefully.")
    else:
        s.append(f"{b.name} caught the ball with one hand.")
        s.append(_say(d, a, "Great catch!"))
        s.append(f"{b.name} was {d.pick(_W_FEELINGS_GOOD)}.")
        s.append(f"They played until it was time for dinner.")
    return s


def _plot_turns(d: _Dice) -> list[str]:
    """Two children want the same toy, argue, and learn to take turns."""
    a, b = _kids(d, 2)
    toy = d.pick(_W_TOYS)
    if d.chance(0.5):
        teacher, where = _adult(d, _W_TEACHERS), "at school"
    else:
        teacher, where = _adult(d, _W_ADULTS[:4]), "at home"
    s = [f"{_opening(d)}, {a.name} and {b.name} were playing {where}."]
    s.append(f"They both wanted to play with the {toy}.")
    s.append(_say(d, a, "It is my turn!"))
    s.append(_say(d, b, "No, it is my turn!"))
    s.append(d.pick((
        "They started to argue, and nobody had fun.",
        f"{b.name} pulled the {toy}, and {a.name} began to cry.",
    )))
    s.append(f"{teacher.name} came over and listened to them.")
    n = d.between(2, 10)
    s.append(_say(d, teacher, d.pick((
        "Why don't you take turns?",
        f"Each of you can play for {_number(n)} minutes, and then you switch.",
        "You can play with it together.",
    ))))
    s.append(d.pick((
        f"First {a.name} played with the {toy}, and then {b.name} played with it.",
        f"So they played with the {toy} together.",
        f"{b.name} let {a.name} go first.",
    )))
    s.append(d.pick((
        "Soon they were laughing again.",
        "They were friends again.",
        "Taking turns was more fun than fighting.",
    )))
    return s


def _plot_job(d: _Dice) -> list[str]:
    """A child wants a job, visits someone who does it, and learns one task."""
    a = _kids(d, 1)[0]
    job, jobs, duty, where, task, tool = d.pick(_W_JOBS)
    worker = _adult(d, _W_ADULTS[8:] + _W_TEACHERS)
    s = [d.pick((
        f"{a.name} wanted to be {_a(job)} {job} when {a.subj} grew up.",
        f"{a.name} dreamed of becoming {_a(job)} {job} one day.",
    ))]
    s.append(d.pick((
        f"{jobs.capitalize()} {duty}.",
        f"{a.Subj} knew that {jobs} {duty}.",
    )))
    s.append(d.pick((
        f"{_opening(d)}, {a.name} visited a {where} with {a.poss} class.",
        f"{_opening(d)}, {a.name} went to a {where} with "
        f"{d.pick(('Mom', 'Dad', 'Grandma', 'Grandpa'))}.",
    )))
    s.append(f"There {a.subj} met {worker.name}, who was {_a(job)} {job}.")
    s.append(f"{worker.name} showed {a.name} how to {task}.")
    s.append(d.pick((
        f"{a.name} tried it too, and it was harder than it looked.",
        f"{a.name} tried it too, and {a.subj} did it well.",
    )))
    s.append(f"{worker.name} also let {a.obj} hold the {tool}.")
    s.append(d.pick((
        f"{a.name} went home {d.pick(_W_FEELINGS_GOOD)} and still wanted to be {_a(job)} {job}.",
        f"That night, {a.name} told everyone about the {where}.",
        f"Now {a.name} wanted to be {_a(job)} {job} more than ever.",
    )))
    return s


def _plot_lesson(d: _Dice) -> list[str]:
    """A teacher explains a topic with true facts, and a child asks a question."""
    a = _kids(d, 1)[0]
    teacher = _adult(d, _W_TEACHERS)
    topic, facts, question, answer = d.pick(_W_LESSONS)
    chosen = d.distinct(facts, min(3, len(facts)))
    s = [d.pick((
        f"{_opening(d)}, {teacher.name} taught the class about {topic}.",
        f"At school, {teacher.name} told the children about {topic}.",
        f"{_opening(d)}, the lesson in {teacher.name}'s class was about {topic}.",
    ))]
    s += chosen
    s.append(f'{a.name} raised {a.poss} hand and asked, "{question}"')
    s.append(f'{teacher.name} smiled and said, "{answer}"')
    s.append(d.pick((
        f"{a.name} thought that was very interesting.",
        f"After school, {a.name} told {d.pick(('Mom', 'Dad', 'Grandma', 'Grandpa'))} "
        f"everything {a.subj} had learned.",
        f"{a.name} wanted to learn more about {topic}.",
        f"That evening, {a.name} drew a picture about {topic}.",
    )))
    return s


def _plot_season(d: _Dice) -> list[str]:
    """A season shapes the weather, the clothes and the games."""
    a, b = _kids(d, 2)
    season, weather, clothes, acts, closing = d.pick(_W_SEASONS)
    w1, w2 = d.distinct(weather, 2)
    act1, act2 = d.distinct(acts, 2)
    s = [f"It was {season}, and {w1}."]
    s.append(d.pick((f"Also, {w2}.", f"Outside, {w2}.")))
    s.append(f"{a.name} put on {clothes} and went outside to meet {b.name}.")
    s.append(f"First they {act1}.")
    s.append(f"Then they {act2}.")
    s.append(_say(d, b, d.pick((f"I love {season}!",
                                f"{season.capitalize()} is the best time of the year!",
                                "Let us do this again tomorrow!"))))
    s.append(f"In the evening, they {closing}.")
    return s


def _plot_shop(d: _Dice) -> list[str]:
    """A child buys something with coins, and the arithmetic of the change is right."""
    a = _kids(d, 1)[0]
    shop, items = d.pick(_W_SHOPS)
    item, price = d.pick(items)
    coins = d.between(price, 12)
    s = [d.pick((
        f"{a.name} had {_number(coins)} coins in {a.poss} pocket.",
        f"{_opening(d)}, {a.name} found {_number(coins)} coins in {a.poss} piggy bank.",
    ))]
    s.append(f"{a.Subj} went to the {shop} to buy {_a(item)} {item}.")
    s.append(f"The {item} cost {_number(price)} coin{'' if price == 1 else 's'}.")
    left = coins - price
    if left == 0:
        s.append(f"{a.name} paid all {a.poss} coins, so {a.subj} had nothing left.")
    else:
        coin_word = "coin" if left == 1 else "coins"
        s.append(f"{a.name} paid, and {a.subj} had {_number(left)} {coin_word} left.")
    s.append(d.pick((
        f"{a.name} carried the {item} home carefully.",
        f"The shopkeeper put the {item} in a paper bag.",
    )))
    s.append(d.pick((
        f"{a.name} was {d.pick(_W_FEELINGS_GOOD)} with {a.poss} {item}.",
        f"At home, {a.name} showed the {item} to {d.pick(('Mom', 'Dad', 'Grandma', 'Grandpa'))}.",
    )))
    return s


def _plot_practice(d: _Dice) -> list[str]:
    """Learning a skill is hard at first; practice every day makes it work at the big event."""
    a = _kids(d, 1)[0]
    skill, bad, event = d.pick(_W_SKILLS)
    bad = bad.replace(" her ", f" {a.poss} ").replace(" his ", f" {a.poss} ")
    weeks = d.between(2, 8)
    s = [d.pick((
        f"{a.name} wanted to learn to {skill}.",
        f"{_opening(d)}, {a.name} decided to learn to {skill}.",
    ))]
    s.append(f"At first it was hard, and {bad}.")
    s.append(d.pick((
        f"{a.name} felt {d.pick(_W_FEELINGS_BAD)}, but {a.subj} did not give up.",
        f"{a.name} wanted to stop, but {d.pick(_W_ADULTS[:4])[0]} said that practice makes "
        "perfect.",
    )))
    s.append(f"So {a.subj} practiced every day for {_number(weeks)} weeks.")
    s.append("Little by little, it got easier.")
    s.append(f"At {event}, {a.name} did very well.")
    s.append(d.pick((
        "Everyone clapped and cheered.",
        f"{a.name} was {d.pick(_W_FEELINGS_GOOD)} because all the practice had worked.",
        f"{a.name} learned that practice makes things easier.",
    )))
    return s


def _plot_wild(d: _Dice) -> list[str]:
    """A child watches a wild animal quietly, learns what it eats, and the animal leaves."""
    a = _kids(d, 1)[0]
    grown = _adult(d, _W_ADULTS[:8])
    animal, animals, where, doing, eats, leaves = d.pick(_W_WILD)
    s = [d.pick((
        f"{_opening(d)}, {a.name} was out with {grown.name} and saw {_a(animal)} {animal} {where}.",
        f"{_opening(d)}, {a.name} and {grown.name} went for a walk, and they saw "
        f"{_a(animal)} {animal} {where}.",
    ))]
    s.append(f"The {animal} was {doing}.")
    s.append(d.pick((
        f"{a.name} stood very still so that {a.subj} would not scare it.",
        f"{a.name} hid behind a tree and watched it quietly.",
    )))
    s.append(_say(d, a, f"What does {_a(animal)} {animal} eat?"))
    s.append(f"{grown.name} said that {animals} like to eat {eats}.")
    s.append(d.pick((
        f"Suddenly a dog barked, and the {animal} {leaves}.",
        f"After a while, the {animal} {leaves}.",
    )))
    s.append(d.pick((
        f"{a.name} drew a picture of the {animal} in {a.poss} notebook.",
        f"{a.name} hoped to see the {animal} again soon.",
        f"{a.name} was {d.pick(_W_FEELINGS_GOOD)} that {a.subj} had seen it.",
    )))
    return s


_PLOTS: tuple[Callable[[_Dice], list[str]], ...] = (
    _plot_accident, _plot_lost, _plot_weather, _plot_share, _plot_need, _plot_pet, _plot_trip,
    _plot_garden, _plot_bake, _plot_balloon, _plot_ball, _plot_turns, _plot_job, _plot_lesson,
    _plot_season, _plot_shop, _plot_practice, _plot_wild,
)


def _one_story(d: _Dice) -> str:
    plot = d.pick(_PLOTS)
    sentences = plot(d)
    if d.chance(0.15) and sentences[-1] not in _W_ENDINGS:
        sentences.append(d.pick(_W_ENDINGS))
    return " ".join(sentences)


def generate_stories(n: int = N_STORIES, seed: int = DEFAULT_SEED) -> list[str]:
    """Generate ``n`` distinct short stories from ``seed``; same arguments, same stories, anywhere.

    Only ``random.Random(seed).random()`` is used (Python guarantees its sequence across
    versions), and duplicate stories are skipped, so the splits made from the list are disjoint.

    Chapter 1, *Pretraining objectives*.
    """
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}.")
    d = _Dice(seed)
    seen: set[str] = set()
    stories: list[str] = []
    while len(stories) < n:
        story = _one_story(d)
        if story not in seen:
            seen.add(story)
            stories.append(story)
    return stories



def corpus_sha256(seed: int = DEFAULT_SEED, n: int = N_STORIES) -> str:
    """The SHA-256 of the generated corpus (stories joined by blank lines), to pin its bytes.

    Chapter 1, *Pretraining objectives*.
    """
    text = "\n\n".join(generate_stories(n, seed))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def generator_vocabulary() -> frozenset[str]:
    """Every lower-cased word the story generator can write, read from its own string literals.

    The words are collected from this module's source (the ``_W_*`` tables and the ``_plot_*``
    and ``_say`` functions, docstrings excluded), not from generated text, so a test can use it
    to check that the corpus is made of real words from the generator's lists.

    Chapter 1, *Pretraining objectives*.
    """
    tree = ast.parse(Path(__file__).read_text(encoding="utf-8"))
    strings: list[str] = []
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id.startswith("_W_") for t in node.targets
        ):
            strings += [c.value for c in ast.walk(node.value)
                        if isinstance(c, ast.Constant) and isinstance(c.value, str)]
        elif isinstance(node, ast.FunctionDef) and node.name.startswith(("_plot_", "_say")):
            doc = ast.get_docstring(node, clean=False)
            strings += [c.value for c in ast.walk(node)
                        if isinstance(c, ast.Constant) and isinstance(c.value, str)
                        and c.value != doc]
    words: set[str] = set()
    for s in strings:
        s = re.sub(r"\{[^}]*\}", " ", s)
        words.update(w.lower() for w in _WORD_RE.findall(s))
    return frozenset(words)


_WORD_RE = re.compile(r"[A-Za-z]+")
