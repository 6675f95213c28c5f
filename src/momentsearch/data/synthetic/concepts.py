"""The concept inventory of the synthetic benchmark: actions, objects, subjects, adjectives, scenes.

Each concept has an id, a group (concepts in one group are confusable: their feature prototypes
are correlated and the oracle grades them as partly relevant) and several surface forms, so that
two captions of the same event rarely share all their words. Actions list the objects they can
take, by object id or by ``cat:<category>``.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Concept:
    id: str
    group: str
    forms: tuple[str, ...]
    mass: bool = False  # plural or mass noun: no "a"
    takes_adjective: bool = True


@dataclass(frozen=True)
class Action:
    id: str
    group: str
    forms: tuple[str, ...]  # finite verb phrases that precede the object noun phrase
    objects: tuple[str, ...]  # object ids or "cat:<category>"


def _o(id_: str, group: str, *forms: str, mass: bool = False, adj: bool = True) -> Concept:
    return Concept(id_, group, forms, mass, adj)


OBJECTS: tuple[Concept, ...] = (
    # drinkware
    _o("cup", "drinkware", "cup", "teacup", "coffee cup"),
    _o("mug", "drinkware", "mug", "coffee mug", "travel mug"),
    _o("glass", "drinkware", "glass", "drinking glass", "tumbler"),
    _o("bottle", "drinkware", "bottle", "water bottle", "flask"),
    # beverages
    _o("coffee", "beverage", "coffee", "hot coffee", "espresso", mass=True, adj=False),
    _o("tea", "beverage", "tea", "hot tea", "green tea", mass=True, adj=False),
    _o("water", "beverage", "water", "cold water", "tap water", mass=True, adj=False),
    _o("juice", "beverage", "juice", "orange juice", "fruit juice", mass=True, adj=False),
    _o("milk", "beverage", "milk", "cold milk", "chocolate milk", mass=True, adj=False),
    # food
    _o("sandwich", "food", "sandwich", "sub", "hoagie", adj=False),
    _o("apple", "food", "apple", "red apple", "green apple", adj=False),
    _o("banana", "food", "banana", "ripe banana", "peeled banana", adj=False),
    _o("bread", "food", "bread", "loaf of bread", "slice of bread", mass=True, adj=False),
    _o("pizza", "food", "pizza", "slice of pizza", "pizza slice", adj=False),
    _o("cake", "food", "cake", "piece of cake", "cupcake", adj=False),
    _o("cookie", "food", "cookie", "biscuit", "chocolate chip cookie", adj=False),
    _o("eggs", "food", "eggs", "fried eggs", "boiled eggs", mass=True, adj=False),
    _o("vegetables", "food", "vegetables", "veggies", "carrots", mass=True, adj=False),
    # dishes
    _o("plate", "dishes", "plate", "dish", "dinner plate"),
    _o("bowl", "dishes", "bowl", "cereal bowl", "soup bowl"),
    _o("pan", "dishes", "pan", "frying pan", "skillet"),
    _o("pot", "dishes", "pot", "cooking pot", "saucepan"),
    # appliances
    _o("fridge", "appliance", "fridge", "refrigerator", "icebox"),
    _o("microwave", "appliance", "microwave", "microwave oven", "microwave door"),
    _o("oven", "appliance", "oven", "baking oven", "oven door"),
    _o("stove", "appliance", "stove", "stovetop", "cooktop"),
    _o("dishwasher", "appliance", "dishwasher", "dish washer", "dishwashing machine"),
    # furniture
    _o("chair", "furniture", "chair", "stool", "armchair"),
    _o("sofa", "furniture", "sofa", "couch", "settee"),
    _o("bed", "furniture", "bed", "mattress", "bunk bed"),
    _o("table", "furniture", "table", "kitchen table", "dining table"),
    _o("desk", "furniture", "desk", "writing desk", "work desk"),
    _o("shelf", "furniture", "shelf", "bookshelf", "shelving unit"),
    # things that open
    _o("door", "openable", "door", "front door", "bedroom door"),
    _o("window", "openable", "window", "windowpane", "kitchen window"),
    _o("drawer", "openable", "drawer", "dresser drawer", "desk drawer"),
    _o("cabinet", "openable", "cabinet", "cupboard", "kitchen cabinet"),
    _o("box", "openable", "box", "cardboard box", "carton"),
    _o("bag", "openable", "bag", "handbag", "purse"),
    _o("backpack", "openable", "backpack", "rucksack", "school bag"),
    _o("closet", "openable", "closet", "wardrobe", "clothes closet"),
    # electronics
    _o("laptop", "electronics", "laptop", "notebook computer", "computer"),
    _o("phone", "electronics", "phone", "cellphone", "smartphone"),
    _o("television", "electronics", "television", "tv", "tv set"),
    _o("camera", "electronics", "camera", "digital camera", "video camera"),
    _o("remote", "electronics", "remote", "remote control", "tv remote"),
    _o("lamp", "electronics", "lamp", "desk lamp", "floor lamp"),
    # clothing and linen
    _o("jacket", "clothing", "jacket", "coat", "hoodie"),
    _o("shoes", "clothing", "shoes", "sneakers", "boots", mass=True),
    _o("hat", "clothing", "hat", "cap", "beanie"),
    _o("shirt", "clothing", "shirt", "t-shirt", "sweater"),
    _o("towel", "linen", "towel", "hand towel", "bath towel"),
    _o("blanket", "linen", "blanket", "quilt", "bedspread"),
    _o("pillow", "linen", "pillow", "cushion", "throw pillow"),
    # reading and writing
    _o("book", "reading", "book", "novel", "paperback"),
    _o("notebook", "reading", "notebook", "notepad", "journal"),
    _o("newspaper", "reading", "newspaper", "paper", "daily paper"),
    _o("magazine", "reading", "magazine", "catalog", "comic book"),
    _o("letter", "reading", "letter", "envelope", "handwritten note"),
    # tools
    _o("broom", "tools", "broom", "sweeping brush", "push broom"),
    _o("vacuum", "tools", "vacuum", "vacuum cleaner", "hoover"),
    _o("knife", "tools", "knife", "kitchen knife", "bread knife"),
    _o("scissors", "tools", "scissors", "pair of scissors", "shears", mass=True),
    _o("hammer", "tools", "hammer", "mallet", "claw hammer"),
    _o("sponge", "tools", "sponge", "scrub brush", "dish sponge"),
    # animals and play
    _o("dog", "animal", "dog", "puppy", "pup"),
    _o("cat", "animal", "cat", "kitten", "kitty"),
    _o("ball", "toy", "ball", "soccer ball", "tennis ball"),
    _o("guitar", "toy", "guitar", "acoustic guitar", "ukulele"),
    _o("bicycle", "toy", "bicycle", "bike", "mountain bike"),
    # small things around the house
    _o("mirror", "decor", "mirror", "wall mirror", "hand mirror"),
    _o("picture", "decor", "picture", "photo", "framed photograph"),
    _o("flowers", "decor", "flowers", "bouquet", "bunch of flowers", mass=True),
    _o("keys", "decor", "keys", "car keys", "set of keys", mass=True),
    _o("medicine", "decor", "medicine", "pills", "medication", mass=True, adj=False),
)

_PORTABLE = (
    "cat:drinkware", "cat:food", "cat:dishes", "cat:clothing", "cat:linen", "cat:reading", "cat:tools",
    "laptop", "phone", "camera", "remote", "box", "bag", "backpack", "ball", "guitar", "picture", "flowers",
    "keys", "medicine",
)
_OPENABLE = ("cat:openable", "fridge", "microwave", "oven", "dishwasher", "laptop", "book", "notebook", "bottle")
_SWITCHABLE = ("television", "lamp", "laptop", "phone", "camera", "stove", "oven", "microwave", "vacuum", "dishwasher")
_SEEN = _PORTABLE + ("cat:furniture", "cat:appliance", "television", "lamp", "window", "door", "mirror", "dog", "cat")


def _a(id_: str, group: str, forms: tuple[str, ...], objects: tuple[str, ...]) -> Action:
    return Action(id_, group, forms, objects)


ACTIONS: tuple[Action, ...] = (
    _a("open", "open_close", ("opens", "pulls open", "is opening"), _OPENABLE),
    _a("close", "open_close", ("closes", "shuts", "is closing"), _OPENABLE),
    _a("pick_up", "grasp", ("picks up", "grabs", "lifts"), _PORTABLE),
    _a("put_down", "grasp", ("puts down", "sets down", "places"), _PORTABLE),
    _a("hold", "grasp", ("holds", "is holding", "clutches"), _PORTABLE),
    _a("carry", "grasp", ("carries", "walks around with", "is carrying"), _PORTABLE),
    _a("throw", "force", ("throws", "tosses", "flings"), ("cat:clothing", "cat:linen", "ball", "keys", "box", "bag", "book", "magazine", "newspaper")),
    _a("drink", "ingest", ("drinks", "sips", "takes a sip of"), ("cat:beverage",)),
    _a("eat", "ingest", ("eats", "takes a bite of", "munches on"), ("cat:food", "medicine")),
    _a("smell", "ingest", ("smells", "sniffs", "takes a whiff of"), ("cat:food", "cat:beverage", "flowers")),
    _a("cook", "kitchen", ("cooks", "prepares", "fries"), ("eggs", "vegetables", "pizza", "bread", "sandwich")),
    _a("cut", "kitchen", ("cuts", "slices", "chops"), ("cat:food", "letter", "newspaper", "shirt")),
    _a("pour", "kitchen", ("pours", "pours out", "serves"), ("cat:beverage",)),
    _a("fill", "kitchen", ("fills", "fills up", "refills"), ("cat:drinkware", "bowl", "pot", "pan")),
    _a("wash", "clean", ("washes", "rinses", "scrubs"), ("cat:dishes", "cat:drinkware", "vegetables", "shirt", "towel")),
    _a("wipe", "clean", ("wipes", "wipes down", "dusts"), ("cat:furniture", "mirror", "window", "stove", "laptop", "television")),
    _a("clean_with", "clean", ("cleans the floor with", "scrubs the room with", "cleans up using"), ("broom", "vacuum", "sponge", "towel")),
    _a("tidy", "clean", ("tidies", "organizes", "straightens up"), ("shelf", "desk", "closet", "drawer", "bed", "table", "cabinet")),
    _a("read", "media", ("reads", "looks through", "is reading"), ("cat:reading",)),
    _a("write_in", "media", ("writes in", "scribbles in", "jots notes in"), ("notebook", "book", "magazine")),
    _a("look_at", "media", ("looks at", "stares at", "glances at"), _SEEN),
    _a("photograph", "media", ("takes a picture of", "photographs", "snaps a photo of"), ("cat:food", "dog", "cat", "flowers", "picture", "window", "mirror", "bicycle")),
    _a("type_on", "device", ("types on", "is typing on", "taps away at"), ("laptop", "phone")),
    _a("talk_on", "device", ("talks on", "chats on", "makes a call on"), ("phone",)),
    _a("turn_on", "switch", ("turns on", "switches on", "powers on"), _SWITCHABLE),
    _a("turn_off", "switch", ("turns off", "switches off", "shuts off"), _SWITCHABLE),
    _a("fix", "switch", ("fixes", "repairs", "tinkers with"), ("lamp", "chair", "bicycle", "laptop", "door", "table", "phone", "television")),
    _a("sit_on", "posture", ("sits on", "sits down on", "takes a seat on"), ("chair", "sofa", "bed", "table", "desk", "box")),
    _a("lie_on", "posture", ("lies on", "lies down on", "stretches out on"), ("bed", "sofa", "blanket", "towel")),
    _a("stand_on", "posture", ("stands on", "climbs onto", "steps onto"), ("chair", "table", "box", "desk")),
    _a("put_on", "dress", ("puts on", "slips on", "tries on"), ("cat:clothing",)),
    _a("take_off", "dress", ("takes off", "removes", "pulls off"), ("cat:clothing",)),
    _a("fold", "dress", ("folds", "folds up", "neatly folds"), ("cat:clothing", "cat:linen", "newspaper", "letter")),
    _a("hang_up", "dress", ("hangs up", "hangs", "puts up"), ("cat:clothing", "towel", "picture", "mirror")),
    _a("push", "force", ("pushes", "shoves", "nudges"), ("chair", "table", "door", "box", "bicycle", "vacuum", "desk")),
    _a("pull", "force", ("pulls", "drags", "tugs on"), ("chair", "table", "door", "box", "blanket", "drawer", "backpack")),
    _a("kick", "force", ("kicks", "boots", "punts"), ("ball", "box", "door", "shoes")),
    _a("shake", "force", ("shakes", "jiggles", "rattles"), ("bottle", "box", "bag", "blanket", "towel", "keys", "medicine")),
    _a("search", "force", ("searches through", "rummages through", "digs through"), ("bag", "backpack", "drawer", "box", "closet", "cabinet", "fridge")),
    _a("hug", "animal", ("hugs", "embraces", "cuddles"), ("pillow", "dog", "cat", "blanket")),
    _a("pet", "animal", ("pets", "strokes", "scratches"), ("dog", "cat")),
    _a("feed", "animal", ("feeds", "gives food to", "gives a treat to"), ("dog", "cat")),
    _a("play_with", "animal", ("plays with", "fiddles with", "toys with"), ("ball", "dog", "cat", "phone", "keys", "remote")),
    _a("play", "animal", ("plays", "strums", "practices on"), ("guitar",)),
)

SUBJECTS: tuple[Concept, ...] = (
    _o("man", "adult", "a man", "the man", "a guy"),
    _o("woman", "adult", "a woman", "the woman", "a lady"),
    _o("child", "young", "a child", "a kid", "the young boy"),
)
GENERIC_SUBJECT = _o("person", "any", "a person", "someone", "the person")

ADJECTIVES: tuple[Concept, ...] = (
    _o("red", "color", "red"),
    _o("blue", "color", "blue"),
    _o("green", "color", "green"),
    _o("black", "color", "black"),
    _o("white", "color", "white"),
    _o("yellow", "color", "yellow"),
    _o("small", "size", "small", "little", "tiny"),
    _o("large", "size", "large", "big", "huge"),
    _o("old", "age", "old", "worn", "battered"),
    _o("new", "age", "new", "brand-new", "shiny"),
    _o("dirty", "state", "dirty", "grimy", "messy"),
    _o("clean", "state", "clean", "spotless", "freshly washed"),
)

SCENES: tuple[Concept, ...] = (
    _o("kitchen", "indoor", "kitchen", "kitchenette"),
    _o("living_room", "indoor", "living room", "lounge", "den"),
    _o("bedroom", "indoor", "bedroom", "bed room"),
    _o("bathroom", "indoor", "bathroom", "restroom"),
    _o("office", "indoor", "office", "study", "home office"),
    _o("garage", "utility", "garage", "workshop"),
    _o("hallway", "indoor", "hallway", "corridor", "entryway"),
    _o("dining_room", "indoor", "dining room", "dining area"),
    _o("laundry_room", "utility", "laundry room", "utility room"),
    _o("basement", "utility", "basement", "cellar"),
    _o("garden", "outdoor", "garden", "backyard", "yard"),
    _o("stairs", "indoor", "staircase", "stairway", "stairs"),
)

ADVERBS = ("slowly", "quickly", "again", "for a moment", "carefully", "for a while")

TEMPLATES = (
    "{subject} {verb} {np}.",
    "{subject} {verb} {np} {scene}.",
    "{scene_cap}, {subject} {verb} {np}.",
    "{subject} {verb} {np} {adverb}.",
    "{subject} then {verb} {np}.",
    "{subject} {verb} {np} {adverb} {scene}.",
)

SUBTITLE_MENTIONS = (
    "Where did I put the {object}?",
    "Can you hand me the {object}?",
    "I really need that {object}.",
    "Look at this {object}!",
    "Who left the {object} here?",
)
SUBTITLE_FILLERS = (
    "Okay.", "Let's go.", "Are you serious?", "I'll be right back.", "What time is it?",
    "Hold on a second.", "That's not what I meant.", "Thanks.", "Come on!", "I don't know.",
)


@dataclass
class Inventory:
    """The inventory with lookups; ``to_dict`` is what the benchmark folder records."""

    actions: tuple[Action, ...] = ACTIONS
    objects: tuple[Concept, ...] = OBJECTS
    subjects: tuple[Concept, ...] = SUBJECTS
    adjectives: tuple[Concept, ...] = ADJECTIVES
    scenes: tuple[Concept, ...] = SCENES
    action_index: dict[str, int] = field(init=False)
    object_index: dict[str, int] = field(init=False)
    compatible: dict[str, tuple[int, ...]] = field(init=False)

    def __post_init__(self) -> None:
        for name, items in (("action", self.actions), ("object", self.objects), ("subject", self.subjects),
                            ("adjective", self.adjectives), ("scene", self.scenes)):
            ids = [c.id for c in items]
            if len(set(ids)) != len(ids):
                raise ValueError(f"duplicate {name} id in the inventory")
        self.action_index = {a.id: i for i, a in enumerate(self.actions)}
        self.object_index = {o.id: i for i, o in enumerate(self.objects)}
        self.compatible = {a.id: self._expand(a) for a in self.actions}

    def _expand(self, action: Action) -> tuple[int, ...]:
        out: list[int] = []
        for ref in action.objects:
            if ref.startswith("cat:"):
                group = ref[4:]
                hits = [i for i, o in enumerate(self.objects) if o.group == group]
                if not hits:
                    raise ValueError(f"action {action.id!r}: no object in category {group!r}")
                out.extend(hits)
            elif ref in self.object_index:
                out.append(self.object_index[ref])
            else:
                raise ValueError(f"action {action.id!r}: unknown object {ref!r}")
        return tuple(sorted(set(out)))

    def to_dict(self) -> dict[str, object]:
        def rows(items: tuple[Concept, ...]) -> list[dict[str, object]]:
            return [{"id": c.id, "group": c.group, "forms": list(c.forms)} for c in items]

        return {
            "actions": [
                {"id": a.id, "group": a.group, "forms": list(a.forms),
                 "objects": [self.objects[i].id for i in self.compatible[a.id]]}
                for a in self.actions
            ],
            "objects": rows(self.objects),
            "subjects": rows(self.subjects),
            "adjectives": rows(self.adjectives),
            "scenes": rows(self.scenes),
        }
