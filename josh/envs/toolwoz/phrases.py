"""How the scripted ToolWOZ agent and user put a slot value into words (values verbatim, so a reader finds them)."""

SLOT_PHRASES = {
    "name": "called {v}",
    "food": "serving {v} food",
    "area": "in the {v}",
    "pricerange": "in the {v} price range",
    "stars": "with {v} stars",
    "type": "of type {v}",
    "departure": "from {v}",
    "destination": "to {v}",
    "day": "on {v}",
    "leaveAt": "leaving after {v}",
    "arriveBy": "arriving by {v}",
    "people": "for {v} people",
    "time": "at {v}",
    "stay": "for {v} nights",
}
