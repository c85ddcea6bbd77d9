"""Plots in which a child finds out about the world: places, jobs, lessons, animals, counting.

Part of the story corpus that chapter 1 (*Pretraining objectives*) trains on.

Each function writes the sentences of one plot with the dice and the characters of
:mod:`course_lib.text.story_world`; :mod:`course_lib.text.stories` picks among them. The facts are
true and the arithmetic is right: the coins left are the coins had minus the price.
"""

from __future__ import annotations

from course_lib.text.story_world import (
    WORDS,
    Dice,
    adult,
    article,
    children,
    number_word,
    opening,
    say,
)

__all__ = [
    "garden_story",
    "job_story",
    "lesson_story",
    "practice_story",
    "season_story",
    "share_story",
    "shop_story",
    "trip_story",
    "wild_story",
]


def share_story(d: Dice) -> list[str]:
    """One child shares food with another, and the counts stay consistent.

    Chapter 1, *Pretraining objectives*.
    """
    a, b = children(d, 2)
    single, plural = d.pick(WORDS.food_items)
    n = d.between(2, 12)
    k = d.between(1, n - 1)
    left = n - k

    def count(m: int) -> str:
        return f"{number_word(m)} {single if m == 1 else plural}"

    place, prep, _, _ = d.pick(WORDS.places)
    s = [d.pick((
        f"{opening(d)}, {a.name} had {count(n)}.",
        f"{opening(d)}, {a.name} went to the {place} with {count(n)} in a bag.",
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
    s.append(say(d, b, d.pick(("Thank you!", "Thank you, you are very kind.",
                                "That is so nice of you."))))
    s.append(d.pick((
        f"They ate the {plural} together.",
        f"They sat down and ate their {plural}.",
        f"{b.name} ate {b.poss} {single if k == 1 else plural} and was not hungry anymore.",
    )))
    s.append(d.pick((
        f"Sharing made {a.name} feel {d.pick(WORDS.feelings_good)}.",
        f"{a.name} and {b.name} became good friends.",
        f"{a.name} was {d.pick(WORDS.feelings_good)} that {a.subj} had shared.",
    )))
    return s


def trip_story(d: Dice) -> list[str]:
    """A child and a grown-up visit a place, see things there, and come home tired.

    Chapter 1, *Pretraining objectives*.
    """
    a = children(d, 1)[0]
    grown = adult(d, WORDS.adults[:8])
    place, prep, sights, acts = d.pick(WORDS.places)
    sight1, sight2 = d.distinct(sights, 2)
    act = d.pick(acts)
    s = [f"{opening(d)}, {a.name} and {grown.name} went to the {place} {d.pick(WORDS.vehicles)}."]
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
        s.append(say(d, a, d.pick(("This is the best day ever!", "Can we come back tomorrow?",
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


def garden_story(d: Dice) -> list[str]:
    """A seed grows when it is watered and wilts when it is not.

    Chapter 1, *Pretraining objectives*.
    """
    a = children(d, 1)[0]
    seed, grown = d.pick(WORDS.seeds)
    days = d.between(3, 12)
    s = [d.pick((
        f"{opening(d)}, {a.name} planted {article(seed)} {seed} seed in the garden.",
        f"{a.name} got {article(seed)} {seed} seed from {d.pick(WORDS.adults)[0]} and planted it "
        "in a pot.",
    ))]
    if d.chance(0.6):
        s.append(d.pick((
            f"Every day, {a.subj} gave it water.",
            f"{a.Subj} watered it every morning and put it in the sun.",
        )))
        s.append(f"After {number_word(days)} days, a small green shoot came up.")
        s.append(f"Soon it grew into {grown}.")
        s.append(f"{a.name} was {d.pick(WORDS.feelings_good)}.")
    else:
        s.append(f"But {a.subj} forgot to water it.")
        s.append("The soil became dry, so the little plant started to droop.")
        s.append(f"{a.name} was {d.pick(WORDS.feelings_bad)}.")
        s.append(f"{a.Subj} gave the plant some water and put it in the sun.")
        s.append(f"After {number_word(days)} days, the plant was green and strong again.")
        s.append(f"Later it grew into {grown}.")
    if d.chance(0.5):
        s.append(d.pick((
            f"{a.name} showed it to all {a.poss} friends.",
            f"{a.name} learned that plants need water and sunlight.",
        )))
    return s


def job_story(d: Dice) -> list[str]:
    """A child wants a job, visits someone who does it, and learns one task.

    Chapter 1, *Pretraining objectives*.
    """
    a = children(d, 1)[0]
    job, jobs, duty, where, task, tool = d.pick(WORDS.jobs)
    worker = adult(d, WORDS.adults[8:] + WORDS.teachers)
    s = [d.pick((
        f"{a.name} wanted to be {article(job)} {job} when {a.subj} grew up.",
        f"{a.name} dreamed of becoming {article(job)} {job} one day.",
    ))]
    s.append(d.pick((
        f"{jobs.capitalize()} {duty}.",
        f"{a.Subj} knew that {jobs} {duty}.",
    )))
    s.append(d.pick((
        f"{opening(d)}, {a.name} visited a {where} with {a.poss} class.",
        f"{opening(d)}, {a.name} went to a {where} with "
        f"{d.pick(('Mom', 'Dad', 'Grandma', 'Grandpa'))}.",
    )))
    s.append(f"There {a.subj} met {worker.name}, who was {article(job)} {job}.")
    s.append(f"{worker.name} showed {a.name} how to {task}.")
    s.append(d.pick((
        f"{a.name} tried it too, and it was harder than it looked.",
        f"{a.name} tried it too, and {a.subj} did it well.",
    )))
    s.append(f"{worker.name} also let {a.obj} hold the {tool}.")
    s.append(d.pick((
        f"{a.name} went home {d.pick(WORDS.feelings_good)} and still wanted to be "
        f"{article(job)} {job}.",
        f"That night, {a.name} told everyone about the {where}.",
        f"Now {a.name} wanted to be {article(job)} {job} more than ever.",
    )))
    return s


def lesson_story(d: Dice) -> list[str]:
    """A teacher explains a topic with true facts, and a child asks a question.

    Chapter 1, *Pretraining objectives*.
    """
    a = children(d, 1)[0]
    teacher = adult(d, WORDS.teachers)
    topic, facts, question, answer = d.pick(WORDS.lessons)
    chosen = d.distinct(facts, min(3, len(facts)))
    s = [d.pick((
        f"{opening(d)}, {teacher.name} taught the class about {topic}.",
        f"At school, {teacher.name} told the children about {topic}.",
        f"{opening(d)}, the lesson in {teacher.name}'s class was about {topic}.",
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


def season_story(d: Dice) -> list[str]:
    """A season shapes the weather, the clothes and the games.

    Chapter 1, *Pretraining objectives*.
    """
    a, b = children(d, 2)
    season, weather, clothes, acts, closing = d.pick(WORDS.seasons)
    w1, w2 = d.distinct(weather, 2)
    act1, act2 = d.distinct(acts, 2)
    s = [f"It was {season}, and {w1}."]
    s.append(d.pick((f"Also, {w2}.", f"Outside, {w2}.")))
    s.append(f"{a.name} put on {clothes} and went outside to meet {b.name}.")
    s.append(f"First they {act1}.")
    s.append(f"Then they {act2}.")
    s.append(say(d, b, d.pick((f"I love {season}!",
                                f"{season.capitalize()} is the best time of the year!",
                                "Let us do this again tomorrow!"))))
    s.append(f"In the evening, they {closing}.")
    return s


def shop_story(d: Dice) -> list[str]:
    """A child buys something with coins, and the arithmetic of the change is right.

    Chapter 1, *Pretraining objectives*.
    """
    a = children(d, 1)[0]
    shop, items = d.pick(WORDS.shops)
    item, price = d.pick(items)
    coins = d.between(price, 12)
    s = [d.pick((
        f"{a.name} had {number_word(coins)} coins in {a.poss} pocket.",
        f"{opening(d)}, {a.name} found {number_word(coins)} coins in {a.poss} piggy bank.",
    ))]
    s.append(f"{a.Subj} went to the {shop} to buy {article(item)} {item}.")
    s.append(f"The {item} cost {number_word(price)} coin{'' if price == 1 else 's'}.")
    left = coins - price
    if left == 0:
        s.append(f"{a.name} paid all {a.poss} coins, so {a.subj} had nothing left.")
    else:
        coin_word = "coin" if left == 1 else "coins"
        s.append(f"{a.name} paid, and {a.subj} had {number_word(left)} {coin_word} left.")
    s.append(d.pick((
        f"{a.name} carried the {item} home carefully.",
        f"The shopkeeper put the {item} in a paper bag.",
    )))
    s.append(d.pick((
        f"{a.name} was {d.pick(WORDS.feelings_good)} with {a.poss} {item}.",
        f"At home, {a.name} showed the {item} to {d.pick(('Mom', 'Dad', 'Grandma', 'Grandpa'))}.",
    )))
    return s


def practice_story(d: Dice) -> list[str]:
    """Learning a skill is hard at first; practice every day makes it work at the big event.

    Chapter 1, *Pretraining objectives*.
    """
    a = children(d, 1)[0]
    skill, bad, event = d.pick(WORDS.skills)
    bad = bad.replace(" her ", f" {a.poss} ").replace(" his ", f" {a.poss} ")
    weeks = d.between(2, 8)
    s = [d.pick((
        f"{a.name} wanted to learn to {skill}.",
        f"{opening(d)}, {a.name} decided to learn to {skill}.",
    ))]
    s.append(f"At first it was hard, and {bad}.")
    s.append(d.pick((
        f"{a.name} felt {d.pick(WORDS.feelings_bad)}, but {a.subj} did not give up.",
        f"{a.name} wanted to stop, but {d.pick(WORDS.adults[:4])[0]} said that practice makes "
        "perfect.",
    )))
    s.append(f"So {a.subj} practiced every day for {number_word(weeks)} weeks.")
    s.append("Little by little, it got easier.")
    s.append(f"At {event}, {a.name} did very well.")
    s.append(d.pick((
        "Everyone clapped and cheered.",
        f"{a.name} was {d.pick(WORDS.feelings_good)} because all the practice had worked.",
        f"{a.name} learned that practice makes things easier.",
    )))
    return s


def wild_story(d: Dice) -> list[str]:
    """A child watches a wild animal quietly, learns what it eats, and the animal leaves.

    Chapter 1, *Pretraining objectives*.
    """
    a = children(d, 1)[0]
    grown = adult(d, WORDS.adults[:8])
    animal, animals, where, doing, eats, leaves = d.pick(WORDS.wild)
    s = [d.pick((
        f"{opening(d)}, {a.name} was out with {grown.name} and saw {article(animal)} {animal} "
        f"{where}.",
        f"{opening(d)}, {a.name} and {grown.name} went for a walk, and they saw "
        f"{article(animal)} {animal} {where}.",
    ))]
    s.append(f"The {animal} was {doing}.")
    s.append(d.pick((
        f"{a.name} stood very still so that {a.subj} would not scare it.",
        f"{a.name} hid behind a tree and watched it quietly.",
    )))
    s.append(say(d, a, f"What does {article(animal)} {animal} eat?"))
    s.append(f"{grown.name} said that {animals} like to eat {eats}.")
    s.append(d.pick((
        f"Suddenly a dog barked, and the {animal} {leaves}.",
        f"After a while, the {animal} {leaves}.",
    )))
    s.append(d.pick((
        f"{a.name} drew a picture of the {animal} in {a.poss} notebook.",
        f"{a.name} hoped to see the {animal} again soon.",
        f"{a.name} was {d.pick(WORDS.feelings_good)} that {a.subj} had seen it.",
    )))
    return s
