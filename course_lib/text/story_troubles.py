"""Plots with a problem and its fix: something breaks, gets lost or goes wrong, and somebody helps.

Part of the story corpus that chapter 1 (*Pretraining objectives*) trains on.

Each function writes the sentences of one plot with the dice and the characters of
:mod:`course_lib.text.story_world`; :mod:`course_lib.text.stories` picks among them. The plots keep
cause and effect consistent: what is dropped is what breaks, who has no umbrella gets wet.
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
    "accident_story",
    "bake_story",
    "ball_story",
    "balloon_story",
    "lost_story",
    "need_story",
    "pet_story",
    "turns_story",
    "weather_story",
]


def accident_story(d: Dice) -> list[str]:
    """Someone drops a fragile thing; it breaks; feelings; a helper; a fix.

    Chapter 1, *Pretraining objectives*.
    """
    a, friend = children(d, 2)
    helper = adult(d) if d.chance(0.6) else friend
    obj, breaks, held = d.pick(WORDS.fragile)
    colour = d.pick(WORDS.colours)
    room = d.pick(WORDS.home_places)
    cause = d.pick(WORDS.fragile_causes)
    s = [f"{opening(d)}, {a.name} was in the {room} with {helper.name}."]
    s.append(d.pick((
        f"{a.Subj} was carrying {article(colour)} {colour} {obj} {held}.",
        f"{a.name} picked up {article(colour)} {colour} {obj} {held}.",
        f"{a.Subj} wanted to show {helper.name} {article(colour)} {colour} {obj} {held}.",
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
    feeling = d.pick(WORDS.feelings_bad)
    s.append(d.pick((
        f"{a.name} was {feeling}.",
        f"{a.name} felt {feeling} and started to cry.",
        f"{a.Subj} looked at the pieces and felt {feeling}.",
    )))
    s.append(say(d, helper, d.pick((
        "Do not worry, accidents happen.", "Are you hurt?", "It is only a little accident.",
        "Let me help you.", "Do not touch the sharp pieces.",
    ))))
    fix, result = d.pick(WORDS.fragile_fixes)
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


def lost_story(d: Dice) -> list[str]:
    """A child loses a thing, looks in two wrong places, and a helper's hint finds it.

    Chapter 1, *Pretraining objectives*.
    """
    a, friend = children(d, 2)
    helper = adult(d) if d.chance(0.5) else friend
    thing = d.pick(WORDS.lost_things)
    wrong1, wrong2, right = d.distinct(WORDS.lost_places, 3)
    s = [d.pick((
        f"{a.name} had a {thing} that {a.subj} loved very much.",
        f"{a.name} loved {a.poss} {thing}.",
        f"{opening(d)}, {a.name} could not find {a.poss} {thing}.",
    ))]
    if "could not find" not in s[0]:
        s.append(f"{opening(d)}, {a.subj} could not find it.")
    s.append(f"{a.Subj} looked {wrong1}, but it was not there.")
    s.append(d.pick((
        f"Then {a.subj} looked {wrong2}, but it was not there either.",
        f"{a.Subj} looked {wrong2} too, but {a.subj} did not find it.",
    )))
    s.append(d.pick((
        f"{a.name} was {d.pick(WORDS.feelings_bad)}.",
        f"{a.name} sat down and felt {d.pick(WORDS.feelings_bad)}.",
    )))
    s.append(say(d, helper, f"Did you look {right}?"))
    s.append(d.pick((
        f"{a.name} looked {right}, and there it was!",
        f"{a.name} ran to look {right}, and the {thing} was there.",
        f"They looked {right} together and found the {thing}.",
    )))
    good = d.pick(WORDS.feelings_good)
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


def weather_story(d: Dice) -> list[str]:
    """Rain or wind changes a trip outside; cause and effect on who gets wet or what flies.

    Chapter 1, *Pretraining objectives*.
    """
    a, b = children(d, 2)
    place, prep, sights, acts = d.pick(WORDS.places[:6] + WORDS.places[9:])
    act = d.pick(acts)
    s = [d.pick((
        f"{opening(d)}, {a.name} and {b.name} went to the {place}.",
        f"{opening(d)}, {a.name} and {a.poss} friend {b.name} went to the {place} to play.",
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
            s.append(f"Now they were both dry, and {b.name} was {d.pick(WORDS.feelings_good)}.")
        else:
            s.append(f"They did not have an umbrella, so they got wet.")
            s.append("They ran home as fast as they could.")
            grown = adult(d)
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
            s.append(say(d, b, "Thank you!"))
            s.append(f"{b.name} was {d.pick(WORDS.feelings_good)} to have {b.poss} {hat} back.")
        else:
            s.append(f"The {hat} flew over a tall fence, and they could not get it.")
            s.append(f"{b.name} was {d.pick(WORDS.feelings_bad)}.")
            s.append(f"{a.name} gave {b.name} {a.poss} own {hat}, and {b.name} smiled.")
    return s


def need_story(d: Dice) -> list[str]:
    """Someone is hungry, cold or tired; a helper does the matching thing; the need goes away.

    Chapter 1, *Pretraining objectives*.
    """
    needer, helper = (children(d, 2) if d.chance(0.5) else (children(d, 1)[0], adult(d)))
    state, help_act, use, result = d.pick(WORDS.needs)
    help_act = help_act.format(o=needer.obj)
    use = use.format(r=needer.refl, p=needer.poss)
    room = d.pick(WORDS.home_places)
    s = [d.pick((
        f"{opening(d)}, {needer.name} came into the {room}.",
        f"{opening(d)}, {needer.name} and {helper.name} were at home.",
        f"{needer.name} sat in the {room} with {helper.name}.",
    ))]
    s.append(d.pick((
        f"{needer.name} was {state}.",
        f"{needer.name} felt very {state}.",
    )))
    s.append(say(d, needer, f"I am {state}."))
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
            f"{helper.name} was {d.pick(WORDS.feelings_good)} to help.",
        )))
    return s


def pet_story(d: Dice) -> list[str]:
    """A pet goes missing, the child looks for it, and finds it where pets hide.

    Chapter 1, *Pretraining objectives*.
    """
    a = children(d, 1)[0]
    kind, names, noise, happy_sign = d.pick(WORDS.pets)
    pet = d.pick(names)
    colour = d.pick(("brown", "white", "black", "gray", "golden", "spotted"))
    trick = d.pick(WORDS.pet_tricks)
    hide = d.pick(WORDS.pet_hides)
    s = [d.pick((
        f"{a.name} had {article(colour)} {colour} {kind} named {pet}.",
        f"{a.name} had a {d.pick(WORDS.sizes)} {kind}, and its name was {pet}.",
    ))]
    s.append(f"{pet} liked to {trick}.")
    s.append(d.pick((
        f"{opening(d)}, {a.name} could not find {pet}.",
        f"{opening(d)}, {pet} was gone.",
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
        f"{a.name} hugged {pet} and was {d.pick(WORDS.feelings_good)}.",
        f"{a.name} was so {d.pick(WORDS.feelings_good)} that {a.subj} danced around the room.",
    )))
    return s


def bake_story(d: Dice) -> list[str]:
    """Baking for someone: a forgotten oven burns it, or it works and the guest is happy.

    Chapter 1, *Pretraining objectives*.
    """
    a, b = children(d, 2)
    short, full, pron, be, second = d.pick(WORDS.bakes)
    occasion = d.pick(WORDS.occasions)
    grown = adult(d, WORDS.adults[:8])
    s = [d.pick((
        f"{opening(d)}, {a.name} wanted to bake {full} for {b.name}'s {occasion}.",
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
        s.append(f"The kitchen smelled of smoke, and {a.name} was {d.pick(WORDS.feelings_bad)}.")
        s.append(say(d, grown, "Let us try again, and this time we will watch the clock."))
        s.append(f"The {second} was perfect.")
    else:
        s.append(d.pick((
            f"After half an hour, the {short} {be} ready.",
            f"Soon the whole house smelled sweet.",
        )))
    s.append(d.pick((
        f"{b.name} was surprised and {d.pick(WORDS.feelings_good)}.",
        f"When {b.name} saw the {short}, {b.subj} clapped {b.poss} hands.",
        f"{b.name} ate a big piece and said it was delicious.",
    )))
    if d.chance(0.5):
        s.append(d.pick(WORDS.endings))
    return s


def balloon_story(d: Dice) -> list[str]:
    """A balloon or kite is let go or popped; a friend makes it right.

    Chapter 1, *Pretraining objectives*.
    """
    a, b = children(d, 2)
    colour = d.pick(WORDS.colours)
    place, prep, _, _ = d.pick(WORDS.places[:2] + WORDS.places[9:])
    s = [f"{opening(d)}, {a.name} got {article(colour)} {colour} balloon {prep} the {place}."]
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
    s.append(f"{a.name} was {d.pick(WORDS.feelings_bad)}.")
    s.append(d.pick((
        f"{b.name} saw this and gave {a.obj} {b.poss} own balloon.",
        f"{b.name} bought {a.obj} a new balloon with {b.poss} money.",
        f"{b.name} came with a new balloon and tied its string to {a.name}'s wrist.",
    )))
    s.append(d.pick((
        f"{a.name} smiled and said thank you.",
        f"Now {a.name} was {d.pick(WORDS.feelings_good)} again.",
        f"{a.name} held the new balloon very tightly.",
    )))
    return s


def ball_story(d: Dice) -> list[str]:
    """A ball is kicked or thrown too hard, with a consequence and an apology.

    Chapter 1, *Pretraining objectives*.
    """
    a, b = children(d, 2)
    place, prep, _, _ = d.pick((WORDS.places[0], WORDS.places[9], WORDS.places[1]))
    neighbour = adult(d, WORDS.adults[8:])
    s = [f"{opening(d)}, {a.name} and {b.name} were playing with a ball {prep} the {place}."]
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
        s.append(say(d, neighbour, "Please be careful next time."))
        s.append(f"{a.name} said sorry, and they played more carefully.")
    else:
        s.append(f"{b.name} caught the ball with one hand.")
        s.append(say(d, a, "Great catch!"))
        s.append(f"{b.name} was {d.pick(WORDS.feelings_good)}.")
        s.append(f"They played until it was time for dinner.")
    return s


def turns_story(d: Dice) -> list[str]:
    """Two children want the same toy, argue, and learn to take turns.

    Chapter 1, *Pretraining objectives*.
    """
    a, b = children(d, 2)
    toy = d.pick(WORDS.toys)
    if d.chance(0.5):
        teacher, where = adult(d, WORDS.teachers), "at school"
    else:
        teacher, where = adult(d, WORDS.adults[:4]), "at home"
    s = [f"{opening(d)}, {a.name} and {b.name} were playing {where}."]
    s.append(f"They both wanted to play with the {toy}.")
    s.append(say(d, a, "It is my turn!"))
    s.append(say(d, b, "No, it is my turn!"))
    s.append(d.pick((
        "They started to argue, and nobody had fun.",
        f"{b.name} pulled the {toy}, and {a.name} began to cry.",
    )))
    s.append(f"{teacher.name} came over and listened to them.")
    n = d.between(2, 10)
    s.append(say(d, teacher, d.pick((
        "Why don't you take turns?",
        f"Each of you can play for {number_word(n)} minutes, and then you switch.",
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
